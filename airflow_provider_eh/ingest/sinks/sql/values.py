"""Values as each database's driver binds them into the column types of :mod:`.columns` (no Airflow import).

A decoded typed event holds decimals, UUIDs, dates, times, instants, durations, nested records and arrays. Each
database gets them in the form its column type reads:

- SQLite has none of those types: decimals and UUIDs as text, dates, times and instants as ISO 8601 text, a duration
  as ISO 8601 text (``P1M2DT0.003S``), nested values as JSON text: the forms a nested field of the record takes in
  its JSON text (:func:`~airflow_provider_eh.client.typed_events.json_default`), so a top-level field and a nested one
  read alike. ``sqlite3``'s own adapter for instants (deprecated since Python 3.12) is never used.
- Postgres (psycopg2, psycopg) binds decimals, dates, times and instants itself; a UUID and a duration go as text
  (read by the ``UUID`` and ``INTERVAL`` columns), nested values as JSON text (read by ``JSONB``).
- MySQL/MariaDB: as Postgres, and an instant in UTC without its offset (``DATETIME(6)`` holds no time zone).

A value of a type none of these is :class:`~airflow_provider_eh.ingest.sinks.contract.ValueRefusedError`, naming the
column and the type: a data error, so its event alone is dead-lettered.
"""

from __future__ import annotations

import datetime
import decimal
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from airflow_provider_eh.client.schema_types import Duration
from airflow_provider_eh.client.typed_events import json_default
from airflow_provider_eh.ingest.sinks.contract import ValueRefusedError

#: the types every driver binds as they are
_PLAIN = frozenset({str, int, float, bool, type(None)})
_BINARY = (bytes, bytearray, memoryview)
_DRIVER_TYPES = {  # what each database's driver binds as it is, beyond _PLAIN
    "sqlite": (*_BINARY,),
    "postgres": (*_BINARY, decimal.Decimal, datetime.date, datetime.time, datetime.timedelta),
    "mysql": (*_BINARY, decimal.Decimal, datetime.date, datetime.time, datetime.timedelta),
}


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=json_default)


def _utc_naive(value: datetime.datetime) -> datetime.datetime:
    return value if value.tzinfo is None else value.astimezone(datetime.UTC).replace(tzinfo=None)


def bound(kind: str, column: str, value: Any) -> Any:
    """``value`` as database ``kind`` (``sqlite``, ``postgres``, ``mysql``) binds it in ``column``;
    :class:`ValueRefusedError` for a value it has no form for."""
    if isinstance(value, (dict, list, tuple)):
        try:
            return _json_text(value)
        except (TypeError, ValueError) as exc:
            raise ValueRefusedError(column, type(value).__name__, f"it holds a value with no JSON form ({exc})") from None
    if kind == "mysql" and isinstance(value, datetime.datetime):
        return _utc_naive(value)
    if kind != "sqlite" and isinstance(value, datetime.datetime):
        return value
    if isinstance(value, _DRIVER_TYPES[kind]):
        return value
    if isinstance(value, Duration):
        return value.iso()
    try:
        return json_default(value)
    except TypeError:
        raise ValueRefusedError(column, type(value).__name__, f"the {kind} sink has no column type for it; return "
                                "a value of a JSON type, bytes, a decimal, a UUID or a date or time from the row "
                                "function") from None


def bind_rows(kind: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
              json_columns: frozenset[str] = frozenset()) -> Sequence[Sequence[Any]]:
    """``rows`` (values in ``columns`` order) as database ``kind`` binds them (:func:`bound`): the rows themselves
    when every value is a plain one, the common case costing one pass over the values' types. A value of one of
    ``json_columns`` (a JSON column: a union of several types, say) is JSON text whatever its type."""
    plain = _PLAIN
    if json_columns & set(columns):
        at = [i for i, c in enumerate(columns) if c in json_columns]
        rows = [tuple(_json_text(v) if i in at and v is not None else v for i, v in enumerate(row)) for row in rows]
    if all(type(v) in plain for row in rows for v in row):
        return rows
    convert: Callable[[str, str, Any], Any] = bound
    return [tuple(v if type(v) in plain else convert(kind, c, v) for c, v in zip(columns, row, strict=True))
            for row in rows]


def sqlite_value(value: Any) -> Any:
    """A value in the text form SQLite gets it in (:func:`bound`); one it has none for as it is."""
    try:
        return bound("sqlite", "?", value)
    except ValueRefusedError:
        return value


def sqlite_values(rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]]:
    """``rows`` with :func:`sqlite_value` applied (the rows themselves when every value is a plain one)."""
    if all(type(v) in _PLAIN or isinstance(v, _BINARY) for row in rows for v in row):
        return rows
    return [tuple(v if type(v) in _PLAIN else sqlite_value(v) for v in row) for row in rows]


def data_errors(conn: Any) -> tuple[type[BaseException], ...]:
    """What a refused row raises: :class:`ValueRefusedError`, and the driver's exception classes for a row the database
    refused, DB-API 2.0's ``IntegrityError`` and ``DataError``, which the driver's top module names (``sqlite3``,
    ``psycopg2``, ``pymysql``, ...)."""
    module = sys.modules.get(type(conn).__module__.split(".")[0])
    return (ValueRefusedError, *(c for c in (getattr(module, "IntegrityError", None), getattr(module, "DataError", None))
                                 if isinstance(c, type) and issubclass(c, BaseException)))
