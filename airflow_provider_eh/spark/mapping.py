"""How a row of a Spark job's output becomes an event: body, properties, partition and order.

Plain Python, no Spark import: the mapping is pickled to executors, where :meth:`RowMapping.event_of`
runs once per row. Every check that can fail on a row (null key, unknown partition, an event over
1 MiB) runs there, before the driver claims any partition, so a bad row leaves no state behind.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.errors import InvalidEventError
from airflow_provider_eh.publishing.fingerprint import canonical_properties
from airflow_provider_eh.publishing.rulebook import (
    MAX_EVENT_BYTES,
    check_properties,
    check_property_name,
    check_size,
    encode_body,
    key_bytes,
    partition_for_key,
)

if TYPE_CHECKING:
    from airflow_provider_eh.publishing.typed import RowEncoder

# Column names the job adds; a user's output must not use them.
PARTITION_COL = "__eh_partition"
SLOT_COL = "__eh_slot"
HASH_COL = "__eh_hash"
BODY_COL = "__eh_body"
INTERNAL_COLUMNS = (PARTITION_COL, SLOT_COL, HASH_COL, BODY_COL)

__all__ = ["MAX_EVENT_BYTES", "RowMapping", "content_hash"]


_BODY_HINT = "give a serializer or a body column"


_PROPERTY_FIX = (
    ": cast the column in the Spark job (a date, timestamp or decimal to string or a number; an array, "
    "map or struct to_json), or drop it from property_columns"
)


def content_hash(body: bytes, properties: dict[str, Any] | None) -> bytes:
    """The tie-breaker of the declared order: equal hashes mean interchangeable events."""
    h = hashlib.sha256(body)
    h.update(b"\x00")
    h.update(canonical_properties(properties))
    return h.digest()


@dataclass(frozen=True)
class RowMapping:
    """
    From row to event.

    :param body_column: column holding the body (bytes, str, or a value serialised as JSON);
        when neither this nor ``serializer`` is given, the row (all user columns) as JSON is the body.
    :param serializer: a picklable callable ``row_dict -> bytes | str | JSON-serialisable`` for the body.
    :param property_columns: columns copied into the event's application properties.
    :param partition_column: column holding the Event Hubs partition id of each row.
    :param key_column: column whose value is hashed to a partition (see ``partition_for_key``).
    :param order_by: columns that order each partition's events; a hash of the event breaks ties,
        so the order, and with it each partition's batch, is deterministic.
    :param encoder: typed events: the body (the body column's value, the serializer's, or the row's
        columns the schema names) is encoded against the resolved schema by Microsoft's encoder
        (:class:`~airflow_provider_eh.publishing.typed.RowEncoder`), no registry asked; a row that does not
        fit fails naming its key and order columns, the field and the schema version.
    """

    body_column: str | None = None
    serializer: Callable[[dict[str, Any]], Any] | None = None
    property_columns: tuple[str, ...] = ()
    partition_column: str | None = None
    key_column: str | None = None
    order_by: tuple[str, ...] = field(default_factory=tuple)
    encoder: RowEncoder | None = None

    def __post_init__(self) -> None:
        if self.body_column and self.serializer:
            raise ValueError("give body_column or serializer, not both")
        if self.partition_column and self.key_column:
            raise ValueError("give partition_column or key_column, not both")
        if not (self.partition_column or self.key_column):
            raise ValueError(
                "give partition_column (the Event Hubs partition id of each row) or key_column (hashed to a "
                "partition); idempotent publishing needs each row's partition before sending"
            )
        object.__setattr__(self, "property_columns", tuple(self.property_columns))
        object.__setattr__(self, "order_by", tuple(self.order_by))

    @property
    def content_type(self) -> str | None:
        """Typed events' content type (``avro/binary+<schema id>``), which the fingerprint covers; else ``None``."""
        return self.encoder.content_type if self.encoder is not None else None

    @property
    def whole_row(self) -> bool:
        """True when the body needs every column (row as JSON, or a serializer)."""
        return not self.body_column

    def required_columns(self) -> list[str]:
        cols = [self.body_column, self.partition_column, self.key_column, *self.property_columns, *self.order_by]
        return [c for c in dict.fromkeys(cols) if c]

    def kept_columns(self) -> list[str]:
        """User columns the prepared output keeps after the body is built: order, then properties."""
        return list(dict.fromkeys([*self.order_by, *self.property_columns]))

    def check_schema(self, columns: Sequence[str], *, source: str) -> None:
        """Fail naming every declared column the output lacks, and what it has instead."""
        missing = [c for c in self.required_columns() if c not in columns]
        if missing:
            raise InvalidEventError(
                f"{source}: the output has no column {', '.join(repr(c) for c in missing)} "
                f"(declared in the operator); it has {', '.join(columns) or 'no columns'}"
            )
        clash = [c for c in columns if c in INTERNAL_COLUMNS]
        if clash:
            raise InvalidEventError(f"{source}: column names {clash} are reserved; rename them in the Spark job")
        for column in self.property_columns:  # before any row is read, with the rulebook's own message
            check_property_name(column, f"{source}: property column {column!r}")

    def describe_row(self, row: dict[str, Any]) -> str:
        """The row's key and order columns, for error messages (the whole row, shortened, when there are none)."""
        cols = [c for c in dict.fromkeys([self.key_column, self.partition_column, *self.order_by]) if c]
        if not cols:
            return f"row {row!r:.200}"
        return "row with " + ", ".join(f"{c}={row.get(c)!r:.80}" for c in cols)

    def event_body(self, row: dict[str, Any]) -> bytes:
        if self.body_column:
            value = row[self.body_column]
            if value is None:
                raise InvalidEventError(
                    f"{self.describe_row(row)}: body column {self.body_column!r} is null; filter or fill it in the Spark job"
                )
        elif self.serializer:
            value = self.serializer(row)
        else:
            value = row if self.encoder is None else self.encoder.select(row)
        if self.encoder is not None:
            return self.encoder.encode(value, _RowLabel(self, row))
        return encode_body(value, _RowLabel(self, row), _BODY_HINT)

    def event_properties(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The property columns, by the event rulebook's one rule: a null stays (AMQP null), a value that is
        not a scalar is refused naming the row and the column."""
        if not self.property_columns:
            return None
        return check_properties({c: row[c] for c in self.property_columns}, _RowLabel(self, row),
                                label="property column {name!r}", fix=_PROPERTY_FIX)

    def event_partition(self, row: dict[str, Any], partition_ids: Sequence[str]) -> str:
        """The row's partition: its partition column, or its key hashed as the non-Spark path does."""
        if self.key_column:
            key = row[self.key_column]
            if key is None:
                raise InvalidEventError(
                    f"{self.describe_row(row)}: key column {self.key_column!r} is null; every row needs a key to map it "
                    "to a partition. Filter or fill null keys in the Spark job."
                )
            try:
                key_bytes(key)
            except InvalidEventError:
                raise InvalidEventError(
                    f"{self.describe_row(row)}: key column {self.key_column!r} holds a {type(key).__name__}; only "
                    "string, binary and integer keys map to a stable partition. Cast the column to string."
                ) from None
            return partition_for_key(key, partition_ids)
        assert self.partition_column is not None
        value = row[self.partition_column]
        if value is None:
            raise InvalidEventError(
                f"{self.describe_row(row)}: partition column {self.partition_column!r} is null; every row needs its "
                "partition id. Filter or fill nulls in the Spark job."
            )
        partition = str(value)
        if partition not in partition_ids:
            raise InvalidEventError(
                f"{self.describe_row(row)}: partition {partition!r} (column {self.partition_column!r}) does not exist; "
                f"the hub has partitions {', '.join(partition_ids)}"
            )
        return partition

    def event_of(self, row: dict[str, Any], partition_ids: Sequence[str]) -> tuple[str, bytes, dict[str, Any] | None]:
        """``(partition, body, properties)`` of one row, checked against the 1 MiB limit of one message."""
        partition = self.event_partition(row, partition_ids)
        body = self.event_body(row)
        props = self.event_properties(row)
        check_size(body, props, _RowLabel(self, row, f" (partition {partition})"),
                   hint="split the row or drop columns from its body")
        return partition, body, props


class _RowLabel:
    """A row's description for the rulebook's error messages, written only when a message is (once per row is costly)."""

    __slots__ = ("mapping", "row", "suffix")

    def __init__(self, mapping: RowMapping, row: dict[str, Any], suffix: str = ""):
        self.mapping, self.row, self.suffix = mapping, row, suffix

    def __str__(self) -> str:
        return self.mapping.describe_row(self.row) + self.suffix

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)
