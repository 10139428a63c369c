"""The target table made to fit the schema of the typed events a batch writes (no Airflow import).

As Kafka Connect's JDBC sink does with ``auto.create`` and ``auto.evolve``: a table that does not exist is created
with a column per field of the schema (:mod:`.columns` gives the types), and a field the table has no column for
gets one (``ALTER TABLE ... ADD COLUMN``) when the store evolves columns (the default). The columns are created
nullable, so that a later version of the schema may make a field optional or add one without a default. A field
the table lacks while evolving is off is an error naming the field, the column type to add and the option.

Columns already there are kept as they are: a value one cannot hold is refused by the database, and its event is
dead-lettered. On MySQL/MariaDB a ``CREATE`` or ``ALTER`` commits by itself: it runs before the batch writes
anything (the processor prepares the columns first), so nothing of the batch is committed with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_eh.client.schema_types import FieldType
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest.sinks.sql.columns import sql_type
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


def table_columns(tx: Any, table: str) -> set[str] | None:
    """The table's columns, lower-cased; ``None`` when it cannot be read (it does not exist)."""
    try:
        with tx.savepoint():
            cursor = tx.execute(f"SELECT * FROM {table} WHERE 1 = 0")
            cursor.fetchall()
            return {str(d[0]).lower() for d in cursor.description or ()}
    except Exception as exc:
        if not tx.is_driver_error(exc):
            raise
        return None


def prepare(tx: Any, table: str, fields: Mapping[str, FieldType], known: dict[str, set[str]], *,
            evolve: bool) -> None:
    """Create ``table`` from ``fields``, or add the columns it lacks (``known``: the columns of the tables seen)."""
    identifier(table, "table")
    database = tx.dialect.kind
    columns = known.get(table)
    if columns is None:
        columns = table_columns(tx, table)
        if columns is None:
            spec = ", ".join(f"{tx.dialect.quote(identifier(n, f'field of the schema for table {table!r}'))} "
                             f"{sql_type(f, database)}" for n, f in fields.items())
            _ddl(tx, table, f"CREATE TABLE {table} ({spec})", "create it from the schema")
            known[table] = {n.lower() for n in fields}
            return
        known[table] = columns
    missing = [(n, f) for n, f in fields.items() if n.lower() not in columns]
    for name, kind in missing:
        column = f"{tx.dialect.quote(identifier(name, f'field of the schema for table {table!r}'))} {sql_type(kind, database)}"
        if not evolve:
            raise SinkConfigError(
                f"The schema of the events has field {name!r} ({kind.describe()}) and table {table!r} has no column for "
                f"it; add it (ALTER TABLE {table} ADD COLUMN {column}), leave the field out of columns, or let the "
                "sink add it (evolve_columns=True).")
        _ddl(tx, table, f"ALTER TABLE {table} ADD COLUMN {column}", f"add column {column} for field {name!r}")
        columns.add(name.lower())


def _ddl(tx: Any, table: str, statement: str, what: str) -> Any:
    try:
        return tx.execute(statement)
    except Exception as exc:
        if not tx.is_driver_error(exc):
            raise
        raise SinkConfigError(
            f"Table {table!r}: could not {what} ({type(exc).__name__}: {exc}); create or alter the table yourself "
            "with the column types of docs/typed-events.md, or give the connection's user the right to.") from exc
