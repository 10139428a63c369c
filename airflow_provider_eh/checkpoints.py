"""Reading Event Hubs consumer checkpoints and ownership from the standard blob layout.

The layout is the one ``BlobCheckpointStore`` of every Azure SDK writes::

    <namespace>/<hub>/<consumer group>/checkpoint/<partition>   metadata: sequencenumber, offset
    <namespace>/<hub>/<consumer group>/ownership/<partition>    metadata: ownerid; last-modified = last claim

This is the package's one checkpoint reader: the checkpoint sensor and trigger and the consumer side
use it. It imports nothing from Airflow and takes a ``ContainerClient`` (sync or ``aio``).

Why not ``BlobCheckpointStore.list_checkpoints``: that method lists with the lower-cased prefix
only, reads ``metadata["sequencenumber"]`` with that exact key and ``int()`` and needs a second list
call for ownership. Here one List Blobs request per consumer group and namespace spelling (one page
holds 5,000 blobs) returns checkpoints *and* ownership, and what other SDKs write is tolerated:

- paths lower-cased (Python, .NET, Java, JavaScript) or spelled as the client was configured
  (early Go releases): the list prefix is the part both spellings share, names are matched
  without regard to case;
- a namespace with a port (the local endpoint, a custom endpoint) written with it (Python's
  ``BlobCheckpointStore``: ``127.0.0.1:5672/<hub>/...``) or without it (JavaScript's
  ``@azure/eventhubs-checkpointstore-blob``: ``127.0.0.1/<hub>/...``): both are listed;
- when a partition has a blob under more than one spelling, the most recently modified wins, for
  checkpoints as for ownership. Two spellings mean two processors of different SDKs took turns on
  the consumer group (neither sees the other's blobs); the one written last is the one running
  now, and its checkpoint is what the group has processed from here on. The higher sequence
  number would let a retired processor's checkpoint report a target reached that the running
  one has not reached; last-modified errs on waiting longer, never on signalling early;
- metadata keys in any case (``sequencenumber``, ``SequenceNumber``);
- empty or placeholder offsets (``""``, ``"None"``, ``"-1"``): offsets are kept as text and never
  compared; only sequence numbers are.

A checkpoint's sequence number is that of the last event the consumer group has processed, so a
target sequence number is reached when ``checkpoint >= target``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.errors import CheckpointStoreError

if TYPE_CHECKING:
    from azure.storage.blob import ContainerClient
    from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

CHECKPOINT = "checkpoint"
OWNERSHIP = "ownership"
_PLACEHOLDER_OFFSETS = frozenset({"", "none", "null"})


def blob_prefix(fully_qualified_namespace: str, eventhub_name: str, consumer_group: str) -> str:
    """The standard (lower-cased) path of a consumer group, ending in ``/``."""
    return f"{fully_qualified_namespace}/{eventhub_name}/{consumer_group}/".lower()


def namespace_spellings(fully_qualified_namespace: str) -> list[str]:
    """The namespace as SDKs write it in blob paths: as given, and without its port if it has one."""
    host, sep, port = fully_qualified_namespace.rpartition(":")
    if not sep or not host or not port.isdigit():
        return [fully_qualified_namespace]
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        return [fully_qualified_namespace]  # a bare IPv6 address: its last group is no port
    return [fully_qualified_namespace, host]


def list_prefix(fully_qualified_namespace: str, eventhub_name: str, consumer_group: str) -> str:
    """The prefix to list: what the lower-cased and the as-configured spellings of the path share."""
    spelled = f"{fully_qualified_namespace}/{eventhub_name}/{consumer_group}/"
    lowered = spelled.lower()
    common = 0
    while common < len(spelled) and spelled[common] == lowered[common]:
        common += 1
    return spelled[:common]


@dataclass(frozen=True)
class Checkpoint:
    """
    One partition's checkpoint.

    :param partition_id: the partition.
    :param sequence_number: sequence number of the last processed event; ``None`` when the blob
        carries none that parses (the partition then counts as not checkpointed).
    :param offset: the offset as written, ``None`` for an empty or placeholder value; informative only.
    :param last_modified: when the checkpoint was last written.
    :param blob_name: the blob it was read from.
    """

    partition_id: str
    sequence_number: int | None
    offset: str | None
    last_modified: datetime | None
    blob_name: str


@dataclass(frozen=True)
class Ownership:
    """
    Who owns a partition of a consumer group.

    :param partition_id: the partition.
    :param owner_id: the owning processor's id; empty when the owner released the partition.
    :param last_modified: the owner's last claim or renewal (processors renew on every load-balancing cycle).
    :param etag: the ownership blob's ETag.
    :param blob_name: the blob it was read from.
    """

    partition_id: str
    owner_id: str
    last_modified: datetime | None
    etag: str | None
    blob_name: str

    @property
    def is_claimed(self) -> bool:
        return bool(self.owner_id)


@dataclass(frozen=True)
class ConsumerGroupCheckpoints:
    """
    Checkpoints and ownership of one consumer group of one hub, as read in one list call.

    :param fully_qualified_namespace: the namespace as used in blob paths.
    :param eventhub_name: the hub.
    :param consumer_group: the consumer group.
    :param container: the container read.
    :param checkpoints: per partition id.
    :param ownership: per partition id.
    """

    fully_qualified_namespace: str
    eventhub_name: str
    consumer_group: str
    container: str
    checkpoints: Mapping[str, Checkpoint] = field(default_factory=dict)
    ownership: Mapping[str, Ownership] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return blob_prefix(self.fully_qualified_namespace, self.eventhub_name, self.consumer_group)

    def sequence_number(self, partition_id: str) -> int | None:
        """The checkpointed sequence number of ``partition_id``, ``None`` when it has none."""
        checkpoint = self.checkpoints.get(str(partition_id))
        return checkpoint.sequence_number if checkpoint else None


def _metadata(blob: Any) -> dict[str, str]:
    return {str(key).lower(): value for key, value in (blob.metadata or {}).items()}


def _sequence_number(raw: str | None) -> int | None:
    try:
        return int(str(raw).strip())
    except (TypeError, ValueError):
        return None


def _offset(raw: str | None) -> str | None:
    if raw is None or str(raw).strip().lower() in _PLACEHOLDER_OFFSETS:
        return None
    return str(raw).strip()


def _newer(current: Any, candidate: Any) -> bool:
    if current is None:
        return True
    a, b = current.last_modified, candidate.last_modified
    return a is None or (b is not None and b > a)


def parse_listing(
    blobs: Iterable[Any],
    *,
    fully_qualified_namespace: str,
    eventhub_name: str,
    consumer_group: str,
    container: str,
) -> ConsumerGroupCheckpoints:
    """
    Build a :class:`ConsumerGroupCheckpoints` from listed blobs (``BlobProperties`` with metadata).

    Blobs of other hubs or consumer groups that share the list prefix are skipped; blobs under any
    spelling of the namespace (:func:`namespace_spellings`) are read, the newest per partition winning.
    """
    prefixes = [blob_prefix(ns, eventhub_name, consumer_group) for ns in namespace_spellings(fully_qualified_namespace)]
    checkpoints: dict[str, Checkpoint] = {}
    ownership: dict[str, Ownership] = {}
    for blob in blobs:
        name: str = blob.name
        lowered = name.lower()
        expected = next((p for p in prefixes if lowered.startswith(p)), None)
        if expected is None:
            continue
        kind, sep, partition_id = name[len(expected):].partition("/")
        if not sep or not partition_id or "/" in partition_id:
            continue
        metadata = _metadata(blob)
        kind = kind.lower()
        if kind == CHECKPOINT:
            item: Any = Checkpoint(
                partition_id=partition_id,
                sequence_number=_sequence_number(metadata.get("sequencenumber")),
                offset=_offset(metadata.get("offset")),
                last_modified=blob.last_modified,
                blob_name=name,
            )
            if _newer(checkpoints.get(partition_id), item):
                checkpoints[partition_id] = item
        elif kind == OWNERSHIP:
            item = Ownership(
                partition_id=partition_id,
                owner_id=str(metadata.get("ownerid") or ""),
                last_modified=blob.last_modified,
                etag=blob.etag,
                blob_name=name,
            )
            if _newer(ownership.get(partition_id), item):
                ownership[partition_id] = item
    return ConsumerGroupCheckpoints(
        fully_qualified_namespace=fully_qualified_namespace,
        eventhub_name=eventhub_name,
        consumer_group=consumer_group,
        container=container,
        checkpoints=dict(sorted(checkpoints.items(), key=lambda kv: _partition_sort_key(kv[0]))),
        ownership=dict(sorted(ownership.items(), key=lambda kv: _partition_sort_key(kv[0]))),
    )


def _partition_sort_key(partition_id: str) -> tuple[int, int | str]:
    return (0, int(partition_id)) if partition_id.isdigit() else (1, partition_id)


def _store_error(exc: Exception, container: str, consumer_group: str, prefix: str) -> CheckpointStoreError:
    from azure.core.exceptions import ResourceNotFoundError

    if isinstance(exc, ResourceNotFoundError):
        return CheckpointStoreError(
            f"Checkpoint container {container!r} does not exist (reading consumer group {consumer_group!r}). "
            "Create it, or pass the container the consumers' BlobCheckpointStore writes to."
        )
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return CheckpointStoreError(
        f"Cannot list checkpoints of consumer group {consumer_group!r} under {prefix} in container "
        f"{container!r}: {type(exc).__name__}: {first_line}"
    )


class _Reader:
    """What the sync and async readers share: where to list, and how to read the listing."""

    def __init__(self, container_client: Any, fully_qualified_namespace: str, eventhub_name: str):
        self.container_client = container_client
        self.fully_qualified_namespace = fully_qualified_namespace
        self.eventhub_name = eventhub_name

    def _list_kwargs(self, consumer_group: str) -> list[dict[str, Any]]:
        """One List Blobs call per spelling of the namespace (two when it has a port)."""
        return [
            {"name_starts_with": list_prefix(ns, self.eventhub_name, consumer_group), "include": ["metadata"]}
            for ns in namespace_spellings(self.fully_qualified_namespace)
        ]

    def _error(self, exc: Exception, consumer_group: str) -> CheckpointStoreError:
        prefix = " and ".join(repr(k["name_starts_with"]) for k in self._list_kwargs(consumer_group))
        return _store_error(exc, self.container_client.container_name, consumer_group, prefix)

    def _parse(self, blobs: Iterable[Any], consumer_group: str) -> ConsumerGroupCheckpoints:
        return parse_listing(
            blobs,
            fully_qualified_namespace=self.fully_qualified_namespace,
            eventhub_name=self.eventhub_name,
            consumer_group=consumer_group,
            container=self.container_client.container_name,
        )


class CheckpointReader(_Reader):
    """
    Reads consumer checkpoints and ownership of one hub through a sync ``ContainerClient``.

    :param container_client: the container the consumers' checkpoint store writes to.
    :param fully_qualified_namespace: the namespace as the consumers' clients name it
        (``<ns>.servicebus.windows.net``, ``host:port`` for the local endpoint).
    :param eventhub_name: the hub.
    """

    container_client: ContainerClient

    def read(self, consumer_group: str) -> ConsumerGroupCheckpoints:
        """Checkpoints and ownership of ``consumer_group``: one List Blobs request (per 5,000 blobs) per spelling."""
        try:
            blobs = [b for kwargs in self._list_kwargs(consumer_group) for b in self.container_client.list_blobs(**kwargs)]
        except Exception as exc:
            raise self._error(exc, consumer_group) from exc
        return self._parse(blobs, consumer_group)


class AsyncCheckpointReader(_Reader):
    """
    Async twin of :class:`CheckpointReader`, over an ``azure.storage.blob.aio.ContainerClient``.

    :param container_client: the container the consumers' checkpoint store writes to.
    :param fully_qualified_namespace: the namespace as the consumers' clients name it.
    :param eventhub_name: the hub.
    """

    container_client: AsyncContainerClient

    async def read(self, consumer_group: str) -> ConsumerGroupCheckpoints:
        """Checkpoints and ownership of ``consumer_group``: one List Blobs request (per 5,000 blobs) per spelling."""
        try:
            blobs = [b for kwargs in self._list_kwargs(consumer_group)
                     async for b in self.container_client.list_blobs(**kwargs)]
        except Exception as exc:
            raise self._error(exc, consumer_group) from exc
        return self._parse(blobs, consumer_group)


# --- targets and lag -------------------------------------------------------------------------


def parse_targets(value: Any) -> dict[str, int] | None:
    """
    Normalise sequence-number targets to ``{partition id: sequence number}``.

    Accepts ``{partition: int}``; the publish operator's XCom ``{partition: {events, first_seq,
    last_seq, service_last_sequence_number}}`` (``service_last_sequence_number`` is waited on, else
    ``last_seq``); a list of either (mapped publish tasks; the highest target per partition wins);
    or any of these as JSON or Python-literal text (a rendered template). ``None`` (or empty text)
    means "no targets given". Partitions without a sequence number (nothing published) are dropped.
    """
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        text = value.decode() if isinstance(value, bytes) else value
        if not text.strip() or text.strip() == "None":
            return None
        try:
            value = json.loads(text)
        except ValueError:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise ValueError(
                    f"targets {text[:200]!r} are neither JSON nor a Python literal; "
                    "pass {partition: sequence number} or the publish task's output"
                ) from None
        return parse_targets(value)
    if isinstance(value, Mapping):
        targets: dict[str, int] = {}
        for partition, target in value.items():
            if isinstance(target, Mapping):
                target = next(
                    (target[k] for k in ("service_last_sequence_number", "last_seq") if target.get(k) is not None),
                    None,
                )
            if target is None:
                continue
            if isinstance(target, bool) or not isinstance(target, (int, str)) or _sequence_number(target) is None:
                raise ValueError(f"target of partition {partition!r} is {target!r}; expected a sequence number")
            targets[str(partition)] = _sequence_number(target)  # type: ignore[assignment]
        return targets
    if isinstance(value, Sequence):
        merged: dict[str, int] = {}
        for item in value:
            for partition, target in (parse_targets(item) or {}).items():
                merged[partition] = max(target, merged.get(partition, target))
        return merged
    raise ValueError(f"targets of type {type(value).__name__} are not understood; pass {{partition: sequence number}}")


@dataclass(frozen=True)
class PartitionLag:
    """
    Where one consumer group stands on one partition.

    ``lag`` is last enqueued minus checkpoint (a partition never checkpointed counts as ``-1``, that
    is, nothing consumed); ``remaining`` is target minus checkpoint, what the wait is for.

    :param consumer_group: the consumer group.
    :param partition_id: the partition.
    :param target: the sequence number to reach; a negative one (empty partition) is reached at once.
    :param checkpoint: the checkpointed sequence number, ``None`` when there is none.
    :param last_enqueued: the partition's last enqueued sequence number when read (``None`` if unknown).
    :param owner_id: the owning processor, ``None`` when unowned or released.
    :param owned_since: the owner's last claim or renewal, ISO 8601.
    """

    consumer_group: str
    partition_id: str
    target: int
    checkpoint: int | None
    last_enqueued: int | None = None
    owner_id: str | None = None
    owned_since: str | None = None

    @property
    def reached(self) -> bool:
        return self.target < 0 or (self.checkpoint is not None and self.checkpoint >= self.target)

    @property
    def remaining(self) -> int:
        return max(0, self.target - (-1 if self.checkpoint is None else self.checkpoint))

    @property
    def lag(self) -> int | None:
        if self.last_enqueued is None:
            return None
        return max(0, self.last_enqueued - (-1 if self.checkpoint is None else self.checkpoint))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (trigger events, XCom)."""
        return {
            "consumer_group": self.consumer_group,
            "partition_id": self.partition_id,
            "target": self.target,
            "checkpoint": self.checkpoint,
            "last_enqueued": self.last_enqueued,
            "lag": self.lag,
            "remaining": self.remaining,
            "reached": self.reached,
            "owner_id": self.owner_id,
            "owned_since": self.owned_since,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartitionLag:
        return cls(
            consumer_group=data["consumer_group"],
            partition_id=str(data["partition_id"]),
            target=int(data["target"]),
            checkpoint=data.get("checkpoint"),
            last_enqueued=data.get("last_enqueued"),
            owner_id=data.get("owner_id"),
            owned_since=data.get("owned_since"),
        )

    def describe(self) -> str:
        checkpoint = "none" if self.checkpoint is None else str(self.checkpoint)
        text = f"partition {self.partition_id}: checkpoint {checkpoint}, target {self.target}"
        text += " (reached)" if self.reached else f" ({self.remaining} to go)"
        if self.last_enqueued is not None:
            text += f", last enqueued {self.last_enqueued}, lag {self.lag}"
        text += f", owner {self.owner_id} since {self.owned_since}" if self.owner_id else ", unowned"
        return text


def partition_lags(
    targets: Mapping[str, int],
    groups: Iterable[ConsumerGroupCheckpoints],
    last_enqueued: Mapping[str, int] | None = None,
) -> list[PartitionLag]:
    """One :class:`PartitionLag` per consumer group and target partition."""
    result = []
    for group in groups:
        for partition_id, target in targets.items():
            owner = group.ownership.get(partition_id)
            claimed = owner is not None and owner.is_claimed
            result.append(
                PartitionLag(
                    consumer_group=group.consumer_group,
                    partition_id=partition_id,
                    target=int(target),
                    checkpoint=group.sequence_number(partition_id),
                    last_enqueued=None if last_enqueued is None else last_enqueued.get(partition_id),
                    owner_id=owner.owner_id if claimed else None,  # type: ignore[union-attr]
                    owned_since=owner.last_modified.isoformat() if claimed and owner.last_modified else None,  # type: ignore[union-attr]
                )
            )
    return result


def describe_lags(lags: Iterable[PartitionLag]) -> str:
    """``consumer group 'x': partition 0: ...; partition 1: ... | consumer group 'y': ...``."""
    by_group: dict[str, list[PartitionLag]] = {}
    for lag in lags:
        by_group.setdefault(lag.consumer_group, []).append(lag)
    return " | ".join(
        f"consumer group {group!r}: " + "; ".join(lag.describe() for lag in items) for group, items in by_group.items()
    )


@dataclass(frozen=True)
class CheckpointProgress:
    """
    Where every consumer group stands on every target partition, read once.

    :param eventhub_name: the hub.
    :param container: the container the checkpoints were read from.
    :param lags: one per consumer group and target partition.
    :param groups_without_checkpoints: consumer groups with no checkpoint at all yet (not started,
        or started at the end of the stream and not checkpointed since).
    """

    eventhub_name: str
    container: str
    lags: tuple[PartitionLag, ...]
    groups_without_checkpoints: tuple[str, ...] = ()

    @property
    def reached(self) -> bool:
        """Every consumer group has checkpointed every target partition at or past its target."""
        return all(lag.reached for lag in self.lags)

    def checkpoints(self) -> dict[str, dict[str, int | None]]:
        """``{consumer group: {partition: checkpointed sequence number}}`` (the sensor's XCom)."""
        result: dict[str, dict[str, int | None]] = {}
        for lag in self.lags:
            result.setdefault(lag.consumer_group, {})[lag.partition_id] = lag.checkpoint
        return result

    def summary(self) -> str:
        """One line for a log or an error: how many targets are reached, then every partition's lag."""
        done = sum(lag.reached for lag in self.lags)
        text = f"{done}/{len(self.lags)} partition targets reached; {describe_lags(self.lags)}"
        for group in self.groups_without_checkpoints:
            text += (
                f". Consumer group {group!r} has no checkpoints yet in container {self.container!r}: "
                "waiting for its consumers to start and checkpoint"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "eventhub_name": self.eventhub_name,
            "container": self.container,
            "lags": [lag.to_dict() for lag in self.lags],
            "groups_without_checkpoints": list(self.groups_without_checkpoints),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckpointProgress:
        return cls(
            eventhub_name=data["eventhub_name"],
            container=data["container"],
            lags=tuple(PartitionLag.from_dict(lag) for lag in data["lags"]),
            groups_without_checkpoints=tuple(data.get("groups_without_checkpoints") or ()),
        )


def measure_progress(
    targets: Mapping[str, int],
    groups: Sequence[ConsumerGroupCheckpoints],
    last_enqueued: Mapping[str, int] | None = None,
) -> CheckpointProgress:
    """Compare ``groups``' checkpoints with ``targets`` (sequence numbers only)."""
    if not groups:
        raise ValueError("no consumer group to compare with the targets")
    return CheckpointProgress(
        eventhub_name=groups[0].eventhub_name,
        container=groups[0].container,
        lags=tuple(partition_lags(targets, groups, last_enqueued)),
        groups_without_checkpoints=tuple(g.consumer_group for g in groups if not g.checkpoints),
    )
