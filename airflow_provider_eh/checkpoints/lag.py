"""Where consumer groups stand against target sequence numbers: the lag model.

Pure arithmetic over what :mod:`airflow_provider_eh.checkpoints.blob_layout` read: per consumer
group and target partition, the checkpoint, the target, how much remains, and the lag behind the
partition's last enqueued event. Only sequence numbers are compared: a checkpoint holds the sequence
number of the last event the group processed, so a target is reached when ``checkpoint >= target``.
No Airflow import; the sensor logs :meth:`CheckpointProgress.summary` and the trigger ships
:meth:`CheckpointProgress.to_dict` in its event.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.checkpoints.blob_layout import ConsumerGroupCheckpoints


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
