"""Values a database driver has no type for, written in the forms the SQL sink gives them (no Airflow import).

A decoded typed event (Avro's logical types, JSON Schema's formats) holds decimals, UUIDs, dates, times and
instants. ``psycopg2`` and PyMySQL bind them as their databases' own types; ``sqlite3`` has none for them (and
its default adapter for instants is deprecated since Python 3.12), so on SQLite they are written as text, in
the same form a nested field of the record gets in its JSON text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_provider_eh.client.typed_events import json_default

#: the types ``sqlite3`` binds as they are (bytes-like ones as BLOBs)
_SQLITE_NATIVE = frozenset({str, int, float, bool, bytes, bytearray, memoryview, type(None)})


def sqlite_value(value: Any) -> Any:
    """A value ``sqlite3`` has no type for in the text form the package gives it everywhere, a decoded record's
    nested fields and JSON payloads alike (:func:`~airflow_provider_eh.client.typed_events.json_default`: decimals
    and UUIDs as text, dates, times and instants as ISO 8601); anything else as it is (``sqlite3`` then names what
    it cannot bind)."""
    if isinstance(value, (bytes, bytearray, memoryview)):  # a subclass of one: still a BLOB, not base64 text
        return value
    try:
        return json_default(value)
    except TypeError:
        return value


def sqlite_values(rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]]:
    """``rows``, with :func:`sqlite_value` applied where a value is not one ``sqlite3`` binds as it is (the rows
    themselves when none is: the common case costs one pass over the values' types)."""
    native = _SQLITE_NATIVE
    if all(type(v) in native for row in rows for v in row):
        return rows
    return [tuple(v if type(v) in native else sqlite_value(v) for v in row) for row in rows]
