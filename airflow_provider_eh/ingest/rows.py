"""Rows from events: the row function's contract, the default one for JSON bodies and typed records, and loading one
by name (no Airflow import).

A row function takes an :class:`~airflow_provider_eh.ingest.events.IngestEvent` and returns a row (a mapping of
column to value), several, or ``None``; what it raises makes the event a dead letter (``rejected``).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_eh.client.typed_events import json_default, typed_content
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest.events import IngestEvent

Row = Mapping[str, Any]
RowFunction = Callable[[IngestEvent], "Row | Iterable[Row] | None"]


def json_rows(columns: Sequence[str] | None = None) -> RowFunction:
    """
    A row function that inserts the body, a JSON object, as one row; a typed event's decoded record likewise.

    A JSON body's nested objects and arrays are JSON text; a typed event's values stay as decoded (a nested record
    a dict, a decimal a ``Decimal``), for each sink to write as its column type holds them (a Postgres ``JSONB``, a
    Delta struct).

    :param columns: the keys to keep, as columns (absent keys become NULL); default: every key. A typed
        Avro event whose record has no field of a column is refused (its schema does not fit the table).
        The function keeps them as its ``columns`` attribute: a table created from a schema gets those fields.
    """

    def to_row(event: IngestEvent) -> Row:
        try:
            obj = event.json()
        except ValueError as exc:
            raise ValueError(f"body is not JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"body is JSON {type(obj).__name__}, expected an object")
        if event.decoded is not None:
            if columns is None:
                return obj
            _check_fields(event, obj, columns)
            return {c: obj.get(c) for c in columns}
        if columns is None:
            return {k: v if type(v) not in _NESTED else _scalar(v) for k, v in obj.items()}
        return {c: _scalar(obj.get(c)) for c in columns}

    to_row.columns = None if columns is None else tuple(columns)  # type: ignore[attr-defined]
    return to_row


def load_row_function(spec: str | None, columns: Sequence[str] | None = None) -> RowFunction:
    """``json`` (or nothing): :func:`json_rows`; ``package.module:function``: that callable."""
    if not spec or spec == "json":
        return json_rows(list(columns) if columns else None)
    module, sep, name = spec.partition(":")
    if not sep:
        raise SinkConfigError(f"row function {spec!r} must be 'json' or 'package.module:function'")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SinkConfigError(f"row function {spec!r} cannot be imported: {exc}") from exc
    if not callable(function):
        raise SinkConfigError(f"row function {spec!r} is not callable")
    return function


_NESTED = (dict, list)


def _scalar(value: Any) -> Any:
    """A nested value as JSON text (a decoded record's bytes, times and decimals as :func:`json_default` writes them)."""
    return json.dumps(value, sort_keys=True, default=json_default) if isinstance(value, (dict, list)) else value


def _check_fields(event: IngestEvent, record: Mapping[str, Any], columns: Sequence[str]) -> None:
    """An Avro record holds every field of its schema: a column it lacks means the schema does not fit the table."""
    typed = typed_content(event.content_type)
    if typed is None or typed.format != "Avro":
        return
    missing = [c for c in columns if c not in record]
    if missing:
        raise ValueError(
            f"the record of schema id {typed.schema_id} has no field {missing[0]!r} for column {missing[0]!r} "
            f"(its fields: {', '.join(sorted(record)) or 'none'}); map the columns to its fields or use a row function")




def rows_of(value: Any) -> list[Row]:
    """What a row function returned, as a list of rows (a mapping: one; ``None``: none)."""
    if value is None:
        return []
    if type(value) is dict or isinstance(value, Mapping):  # a dict first: the ABC check is slow per event
        return [value]
    rows = list(value)
    for row in rows:
        if not isinstance(row, Mapping):
            raise TypeError(f"the row function returned {type(row).__name__}; expected a mapping of column to value")
    return rows


