"""Reading Event Hubs consumer checkpoints and ownership from the standard blob layout.

The layout is the one ``BlobCheckpointStore`` of every Azure SDK writes::

    <namespace>/<hub>/<consumer group>/checkpoint/<partition>   metadata: sequencenumber, offset
    <namespace>/<hub>/<consumer group>/ownership/<partition>    metadata: ownerid; last-modified = last claim

This is the package's one checkpoint reader: the checkpoint sensor and trigger (through
:mod:`airflow_provider_eh.checkpoints.lag`) and the consumer side use it. It imports nothing from
Airflow and takes a ``ContainerClient`` (sync or ``aio``).

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def partition_blob(fully_qualified_namespace: str, eventhub_name: str, consumer_group: str, kind: str, partition_id: str) -> str:
    """The standard blob of a partition's ``kind`` (:data:`CHECKPOINT` or :data:`OWNERSHIP`), lower-cased as the SDKs write it."""
    return f"{blob_prefix(fully_qualified_namespace, eventhub_name, consumer_group)}{kind}/{partition_id}".lower()


def namespace_spellings(fully_qualified_namespace: str) -> list[str]:
    """The namespace as SDKs write it in blob paths: as given, and without its port if it has one."""
    host, sep, port = fully_qualified_namespace.rpartition(":")
    if not sep or not host or not port.isdigit():
        return [fully_qualified_namespace]
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        return [fully_qualified_namespace]  # a bare IPv6 address: its last group is no port
    return [fully_qualified_namespace, host]


def list_prefix(fully_qualified_namespace: str, eventhub_name: str, consumer_group: str | None) -> str:
    """The prefix to list: what the lower-cased and the as-configured spellings of the path share (of the hub's
    every consumer group when ``consumer_group`` is ``None``)."""
    spelled = f"{fully_qualified_namespace}/{eventhub_name}/" + ("" if consumer_group is None else f"{consumer_group}/")
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


def groups_in_listing(blobs: Iterable[Any], *, fully_qualified_namespace: str, eventhub_name: str) -> list[str]:
    """The consumer groups with checkpoint or ownership blobs among ``blobs`` (a listing of the hub's prefix), each
    once as first found (paths in any case, under any spelling of the namespace), in name order."""
    prefixes = [f"{ns}/{eventhub_name}/".lower() for ns in namespace_spellings(fully_qualified_namespace)]
    found: dict[str, str] = {}
    for blob in blobs:
        lowered = blob.name.lower()
        prefix = next((p for p in prefixes if lowered.startswith(p)), None)
        if prefix is None:
            continue
        parts = blob.name[len(prefix):].split("/")
        if len(parts) == 3 and parts[0] and parts[2] and parts[1].lower() in (CHECKPOINT, OWNERSHIP):
            found.setdefault(parts[0].lower(), parts[0])
    return sorted(found.values(), key=str.lower)


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

    def _list_kwargs(self, consumer_group: str | None) -> list[dict[str, Any]]:
        """One List Blobs call per spelling of the namespace (two when it has a port); of the hub's every consumer
        group when ``consumer_group`` is ``None``."""
        return [
            {"name_starts_with": list_prefix(ns, self.eventhub_name, consumer_group), "include": ["metadata"]}
            for ns in namespace_spellings(self.fully_qualified_namespace)
        ]

    def _error(self, exc: Exception, consumer_group: str | None) -> CheckpointStoreError:
        prefix = " and ".join(repr(k["name_starts_with"]) for k in self._list_kwargs(consumer_group))
        return _store_error(exc, self.container_client.container_name,
                            "(every group of the hub)" if consumer_group is None else consumer_group, prefix)

    def _parse_groups(self, blobs: list[Any], consumer_groups: Iterable[str] | None) -> list[ConsumerGroupCheckpoints]:
        names = groups_in_listing(blobs, fully_qualified_namespace=self.fully_qualified_namespace,
                                  eventhub_name=self.eventhub_name) if consumer_groups is None else list(consumer_groups)
        read: dict[str, ConsumerGroupCheckpoints] = {}
        for name in names:
            if name.lower() not in read:
                read[name.lower()] = self._parse(blobs, name)
        return list(read.values())

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

    def read_hub(self, consumer_groups: Iterable[str] | None = None) -> list[ConsumerGroupCheckpoints]:
        """Checkpoints and ownership of ``consumer_groups`` (each once, whatever its case), or of every consumer
        group found with checkpoint or ownership blobs of the hub: one listing of the hub's blobs (a List Blobs
        request per 5,000 blobs) per spelling, however many groups."""
        try:
            blobs = [b for kwargs in self._list_kwargs(None) for b in self.container_client.list_blobs(**kwargs)]
        except Exception as exc:
            raise self._error(exc, None) from exc
        return self._parse_groups(blobs, consumer_groups)


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
