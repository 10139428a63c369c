"""The reader's offsets: each partition's next sequence number, and how far a micro-batch may go; no Spark.

A stream's offset is ``{"<partition id>": <next sequence number>}``, the JSON Spark keeps in the query's
checkpoint: a micro-batch reads each partition's events from its start offset up to, not including, its
end offset. The hub's side of a plan is :class:`PartitionState` (what ``get_partition_properties``
reports); :func:`plan_end` takes a start, the hub's state and the limits and gives the end, so the
admission control is pure arithmetic that unit tests pin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from airflow_provider_eh.spark.datasource.positions import EARLIEST, LATEST, SEQUENCE, Position


@dataclass(frozen=True)
class PartitionState:
    """
    One partition as the hub reports it.

    :param partition_id: the partition.
    :param beginning: the first sequence number still held (retention drops older ones).
    :param end: the next sequence number to be enqueued (the last one's plus one; ``beginning`` when empty).
    :param last_offset: the last event's offset, ``None`` when the partition is empty.
    :param last_enqueued_time: the last event's enqueued time, ``None`` when empty.
    """

    partition_id: str
    beginning: int
    end: int
    last_offset: str | None = None
    last_enqueued_time: datetime | None = None

    @classmethod
    def of_properties(cls, properties: Mapping[str, object]) -> PartitionState:
        """From the SDK's ``get_partition_properties`` dict."""
        last = int(properties["last_enqueued_sequence_number"])  # type: ignore[call-overload]
        empty = bool(properties.get("is_empty")) or last < 0
        beginning = int(properties.get("beginning_sequence_number") or 0)  # type: ignore[call-overload]
        offset = properties.get("last_enqueued_offset")
        when = properties.get("last_enqueued_time_utc")
        return cls(str(properties["id"]), beginning, (last + 1) if not empty else max(beginning, last + 1),
                   None if empty or offset is None else str(offset),
                   when if isinstance(when, datetime) and not empty else None)


def resolve(position: Position, state: PartitionState, *, start: bool) -> int | None:
    """The next sequence number ``position`` means in a partition (for an end: the first one not read);
    ``None`` for an enqueued time, which only the events can answer."""
    if position.kind == EARLIEST:
        return state.beginning
    if position.kind == LATEST:
        return state.end
    if position.kind == SEQUENCE:
        assert position.sequence_number is not None
        inclusive = position.inclusive
        return position.sequence_number + (0 if inclusive == start else 1)
    return None


def fair_shares(available: Mapping[str, int], total: int) -> dict[str, int]:
    """How many of each partition's ``available`` events a micro-batch of at most ``total`` takes: all of a
    partition that has less than an equal share, the rest split evenly (the lowest partition ids take the remainder)."""
    shares = {p: 0 for p in available}
    left = max(0, total)
    waiting = sorted(available, key=lambda p: (available[p], _order(p)))
    while waiting and left > 0:
        equal = left // len(waiting)
        smallest = waiting[0]
        if available[smallest] <= equal:
            shares[smallest] = available[smallest]
            left -= available[smallest]
            waiting.pop(0)
            continue
        extra = left - equal * len(waiting)
        for i, p in enumerate(sorted(waiting, key=_order)):
            shares[p] = equal + (1 if i < extra else 0)
        break
    return shares


def _order(partition_id: str) -> tuple[int, int | str]:
    return (0, int(partition_id)) if partition_id.isdigit() else (1, partition_id)


def plan_end(start: Mapping[str, int], hub: Mapping[str, PartitionState], *, max_total: int | None = None,
             max_per_partition: int | None = None, target: Mapping[str, int] | None = None,
             bounds: Mapping[str, int] | None = None) -> dict[str, int]:
    """
    The end offset of the next micro-batch from ``start``.

    A partition the hub has and ``start`` lacks (added to the hub since) starts at its beginning. Each partition
    goes to the hub's end, or ``target``'s (``Trigger.AvailableNow``: what there was when the query started; a
    partition it lacks stays where it is), or its bound in ``bounds`` (the ending positions; a partition it lacks
    has none), whichever comes first, at most ``max_per_partition`` events further, and all of them at most
    ``max_total`` events further (:func:`fair_shares`). A partition ``start`` names and the hub no longer lists
    keeps its offset.
    """
    begin = {p: start.get(p, state.beginning) for p, state in hub.items()}
    available: dict[str, int] = {}
    for p, state in hub.items():
        end = state.end if target is None else min(state.end, target.get(p, begin[p]))
        if bounds is not None and p in bounds:
            end = min(end, bounds[p])
        n = max(0, end - begin[p])
        available[p] = n if max_per_partition is None else min(n, max_per_partition)
    if max_total is not None:
        available = fair_shares(available, max_total)
    result = {p: int(v) for p, v in start.items()}
    result.update({p: begin[p] + available[p] for p in hub})
    return dict(sorted(result.items(), key=lambda item: _order(item[0])))


def check_offset(offset: Mapping[str, object], what: str) -> dict[str, int]:
    """An offset read back from Spark's checkpoint: partition id to a whole number, else a clear error."""
    checked: dict[str, int] = {}
    for p, value in offset.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{what}: partition {p} has offset {value!r}, not a sequence number; the query's "
                             "checkpoint was not written by this source")
        checked[str(p)] = value
    return checked


__all__ = ["EARLIEST", "LATEST", "SEQUENCE", "PartitionState", "check_offset", "fair_shares", "plan_end", "resolve"]
