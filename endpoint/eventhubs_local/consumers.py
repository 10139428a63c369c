"""Consumers: where a consumer starts reading, and owner levels (epochs) on a partition.

Broker layer. A consumer is anything with the ``Consumer`` attributes below (the AMQP layer's
delivery link); a higher owner level takes the partition from lower ones by calling their ``steal``.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from .entities import Refused
from .log import PartitionLog
from .store import Hub

_FILTER = re.compile(
    r"^\s*amqp\.annotation\.x-opt-(offset|sequence-number|enqueued-time)\s*(>=|>)\s*'([^']*)'\s*$", re.IGNORECASE
)


class Consumer(Protocol):
    """What the broker needs of a receiving link: where it reads, its owner level, and how to take it away."""

    hub: Hub
    group: str
    partition_id: str
    epoch: int | None
    closed: bool

    @property
    def key(self) -> tuple[str, str, str]: ...

    def steal(self, description: str) -> None: ...


def start_position(expression: Any, log: PartitionLog) -> int:
    """The first sequence number to deliver for a selector filter ``expression`` (None: the log's start)."""
    if expression is None:
        return log.begin_seq
    if isinstance(expression, (bytes, bytearray, memoryview)):
        expression = bytes(expression).decode("utf-8", "replace")
    match = _FILTER.match(str(expression))
    if not match:
        raise Refused("amqp:invalid-field", f"unsupported selector filter {expression!r}")
    field, op, value = match.group(1).lower(), match.group(2), match.group(3)
    inclusive = op == ">="
    if value == "@latest":
        return log.next_seq
    try:
        number = int(value)
    except ValueError:
        raise Refused("amqp:invalid-field", f"filter value {value!r} for x-opt-{field} is not an integer") from None
    if field == "offset":
        if number < 0:
            return log.begin_seq
        seq = log.seq_for_offset(number, inclusive)
    elif field == "sequence-number":
        seq = number if inclusive else number + 1
    else:
        seq = log.seq_for_time(number, inclusive)
    return min(max(seq, log.begin_seq), log.next_seq)


class Receivers:
    """The open consumers of every (hub, consumer group, partition), by owner level."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str, str], list[Consumer]] = {}

    def register(self, link: Consumer) -> None:
        """Admit a consumer, stealing lower (or equal) owner levels; refuse if a higher one holds on."""
        current = [r for r in self.by_key.get(link.key, []) if not r.closed]
        epochs = [r.epoch for r in current if r.epoch is not None]
        if link.epoch is None:
            if epochs:
                raise Refused(
                    "amqp:link:stolen",
                    f"a receiver with owner level {max(epochs)} is active on partition {link.partition_id} of "
                    f"{link.hub.name}/{link.group}; receivers without an owner level are not allowed")
        else:
            if epochs and max(epochs) > link.epoch:
                raise Refused(
                    "amqp:link:stolen",
                    f"a receiver with higher owner level {max(epochs)} than {link.epoch} is active on partition "
                    f"{link.partition_id} of {link.hub.name}/{link.group}")
            for old in current:
                old.steal(f"New receiver with owner level {link.epoch} on partition {link.partition_id} "
                          f"of {link.hub.name}/{link.group} was opened; this one (owner level "
                          f"{old.epoch}) is closed.")
            current = []
        current.append(link)
        self.by_key[link.key] = current

    def release(self, link: Consumer) -> None:
        current = self.by_key.get(link.key)
        if current and link in current:
            current.remove(link)
            if not current:
                del self.by_key[link.key]

    def describe(self) -> list[dict[str, Any]]:
        """The admitted consumers (their start position fixed): what a test waits on before sending."""
        return [{"hub": r.hub.name, "consumer_group": r.group, "partition": r.partition_id, "owner_level": r.epoch}
                for current in self.by_key.values() for r in current if not r.closed]
