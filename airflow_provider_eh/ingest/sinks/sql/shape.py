"""The target table made to fit the schema of the typed events a batch writes (no Airflow import).

As Kafka Connect's JDBC sink does with ``auto.create`` and ``auto.evolve``: a table that does not exist is created
with a column per field of the schema (:mod:`.columns` gives the types), and a field the table has no column for
gets one (``ALTER TABLE ... ADD COLUMN``) when the store evolves columns (the default). The columns are created
nullable, so that a later version of the schema may make a field optional or add one without a default. A field
the table lacks while evolving is off is an error naming the field, the column type to add and the option.

A column already there keeps its type. A field whose kind its column cannot hold at all (a new version of the schema
made an ``int`` a ``string``, say: :func:`~.columns.holds`) is an error naming the table, the field, the column's type
and the new type, raised before anything is changed or written; a single value a column refuses (a decimal too wide)
is refused by the database, and its event is dead-lettered. On MySQL/MariaDB a ``CREATE`` or ``ALTER`` commits by
itself: it runs before the batch writes anything (the processor prepares the columns first), so nothing of the batch
is committed with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_eh.client.schema_types import FieldType
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest.sinks.sql.columns import holds, sql_type
from airflow_provider_eh.ingest.sinks.sql.tables import identifier

# ``store``: a SqlIngestStore, ``tx``: its Transaction (typed Any: this module is below them)


def verify_target(store: Any, table: str) -> None:
    """Fail early, naming the table, when the target table cannot be read for a right the connection lacks; a table
    that does not exist yet passes (typed events' schemas create it, and a batch of untyped rows into it is refused,
    naming it)."""
    try:
        cursor = store.conn.cursor()
        cursor.execute(store.dialect.sql(f"SELECT 1 FROM {identifier(table, 'table')} WHERE 1 = 0"))
        cursor.fetchall()
        store.dialect.end_read(store.conn)
    except SinkConfigError:
        raise
    except Exception as exc:
        store.dialect.end_read(store.conn)
        text = str(exc).lower()
        if "permission" in text or "denied" in text:
            raise SinkConfigError(
                f"Target table {table!r} cannot be read ({type(exc).__name__}: {exc}); grant the connection's user "
                "the right to read and write it.") from exc


def table_columns(tx: Any, table: str) -> dict[str, str] | None:
    """The table's columns, lower-cased, with their declared types as the database's catalog spells them (``""``
    where it cannot be read); ``None`` when the table cannot be read (it does not exist)."""
    try:
        with tx.savepoint():
            cursor = tx.execute(f"SELECT * FROM {table} WHERE 1 = 0")
            cursor.fetchall()
            names = [str(d[0]).lower() for d in cursor.description or ()]
    except Exception as exc:
        if not tx.is_driver_error(exc):
            raise
        return None
    declared = _declared_types(tx, table)
    return {name: declared.get(name, "") for name in names}


def _declared_types(tx: Any, table: str) -> dict[str, str]:
    """The declared type of each column, lower-cased names, from the database's catalog (``{}`` when it cannot be
    read: the columns are then not judged)."""
    kind = tx.dialect.kind
    schema, _, name = table.rpartition(".")
    params: tuple[Any, ...]
    if kind == "sqlite":
        statement, params = f"PRAGMA {schema + '.' if schema else ''}table_info({name})", ()
    elif kind == "postgres":
        statement, params = ("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
                             "to_regclass(?) AND attnum > 0 AND NOT attisdropped", (table,))
    else:
        statement, params = ("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
                             "COALESCE(?, DATABASE()) AND TABLE_NAME = ?", (schema or None, name))
    try:
        with tx.savepoint():
            rows = tx.execute(statement, params).fetchall()
    except Exception as exc:
        if not tx.is_driver_error(exc):
            raise
        return {}
    if kind == "sqlite":
        rows = [(row[1], row[2]) for row in rows]
    return {_text(column).lower(): _text(declared) for column, declared in rows}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def prepare(tx: Any, table: str, fields: Mapping[str, FieldType], known: dict[str, dict[str, str]], *,
            evolve: bool) -> None:
    """Create ``table`` from ``fields``, or add the columns it lacks (``known``: the columns of the tables seen, with
    their declared types); a field its column cannot hold is :class:`SinkConfigError`, before any change."""
    identifier(table, "table")
    database = tx.dialect.kind
    columns = known.get(table)
    if columns is None:
        columns = table_columns(tx, table)
        if columns is None:
            spec = ", ".join(f"{tx.dialect.quote(identifier(n, f'field of the schema for table {table!r}'))} "
                             f"{sql_type(f, database)}" for n, f in fields.items())
            _ddl(tx, table, f"CREATE TABLE {table} ({spec})", "create it from the schema")
            known[table] = {n.lower(): sql_type(f, database) for n, f in fields.items()}
            return
        known[table] = columns
    missing = []
    for name, kind in fields.items():
        declared = columns.get(name.lower())
        if declared is None:
            missing.append((name, kind))
        elif declared and not holds(declared, kind, database):
            raise SinkConfigError(_changed(tx, table, name, kind, declared))
    for name, kind in missing:
        column = f"{tx.dialect.quote(identifier(name, f'field of the schema for table {table!r}'))} {sql_type(kind, database)}"
        if not evolve:
            raise SinkConfigError(
                f"The schema of the events has field {name!r} ({kind.describe()}) and table {table!r} has no column for "
                f"it; add it (ALTER TABLE {table} ADD COLUMN {column}), leave the field out of columns, or let the "
                "sink add it (evolve_columns=True).")
        _ddl(tx, table, f"ALTER TABLE {table} ADD COLUMN {column}", f"add column {column} for field {name!r}")
        columns[name.lower()] = sql_type(kind, database)


def _changed(tx: Any, table: str, name: str, kind: FieldType, declared: str) -> str:
    """The error of a field whose type its column cannot hold (a new version of the schema changed it)."""
    database = tx.dialect.kind
    wanted = sql_type(kind, database)
    column = tx.dialect.quote(name)
    change = {
        "postgres": f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {wanted} USING {column}::{wanted}",
        "mysql": f"ALTER TABLE {table} MODIFY COLUMN {column} {wanted}",
    }.get(database)
    how = (f"change the column's type ({change})" if change else
           f"copy the table into one whose column {name} is {wanted} (SQLite cannot change a column's type)")
    return (f"Table {table!r}: the schema of the events has field {name!r} as {kind.describe()} and its column is "
            f"{declared}, which cannot hold it; {how}, write to a new table, or map the field to another column with "
            "a row function. Nothing of the batch was written.")


def _ddl(tx: Any, table: str, statement: str, what: str) -> Any:
    try:
        return tx.execute(statement)
    except Exception as exc:
        if not tx.is_driver_error(exc):
            raise
        raise SinkConfigError(
            f"Table {table!r}: could not {what} ({type(exc).__name__}: {exc}); create or alter the table yourself "
            "with the column types of docs/reference/column-types.md, or give the connection's user the right to.") from exc
