"""The SQL sink's column type for each kind of schema field, per database (no Airflow import).

A table the sink creates from an event's schema, and a column it adds when the schema gains a field, take these
types (``docs/typed-events.md`` shows them as a table, generated from :data:`SQL_TYPES`). Each kind lands as the
database's own type where it has one; nested values (records, arrays, maps, unions of several types) are JSON
(``JSONB`` on Postgres, ``JSON`` on MariaDB, JSON text on SQLite). SQLite has no decimal, UUID, date or time type:
those are text in the forms of :mod:`.values`, which SQLite's date and time functions read.
"""

from __future__ import annotations

from airflow_provider_eh.client.schema_types import KINDS, FieldType

#: databases as :attr:`~airflow_provider_eh.ingest.sinks.sql.dialects.Dialect.kind` names them
DATABASES = ("sqlite", "postgres", "mysql")
_JSON = ("TEXT", "JSONB", "JSON")

#: kind -> (SQLite, Postgres, MySQL/MariaDB) column type; ``{p}``/``{s}``: a decimal's precision and scale
SQL_TYPES: dict[str, tuple[str, str, str]] = {
    "boolean": ("INTEGER", "BOOLEAN", "BOOLEAN"),
    "int": ("INTEGER", "INTEGER", "INT"),
    "long": ("INTEGER", "BIGINT", "BIGINT"),
    "float": ("REAL", "REAL", "FLOAT"),
    "double": ("REAL", "DOUBLE PRECISION", "DOUBLE"),
    "string": ("TEXT", "TEXT", "LONGTEXT"),
    "bytes": ("BLOB", "BYTEA", "LONGBLOB"),
    "fixed": ("BLOB", "BYTEA", "LONGBLOB"),
    "enum": ("TEXT", "TEXT", "VARCHAR(255)"),
    "decimal": ("TEXT", "NUMERIC({p},{s})", "DECIMAL({p},{s})"),
    "uuid": ("TEXT", "UUID", "CHAR(36)"),
    "date": ("TEXT", "DATE", "DATE"),
    "time-millis": ("TEXT", "TIME(3)", "TIME(3)"),
    "time-micros": ("TEXT", "TIME(6)", "TIME(6)"),
    "timestamp-millis": ("TEXT", "TIMESTAMPTZ", "DATETIME(6)"),
    "timestamp-micros": ("TEXT", "TIMESTAMPTZ", "DATETIME(6)"),
    "local-timestamp-millis": ("TEXT", "TIMESTAMP", "DATETIME(6)"),
    "local-timestamp-micros": ("TEXT", "TIMESTAMP", "DATETIME(6)"),
    "duration": ("TEXT", "INTERVAL", "VARCHAR(64)"),
    "array": _JSON,
    "map": _JSON,
    "record": _JSON,
    "union": _JSON,
    "json": _JSON,
}
assert tuple(SQL_TYPES) == KINDS, "a kind without a column type"

#: the kinds whose columns hold JSON: every value of them is written as JSON text
JSON_KINDS = frozenset({"array", "map", "record", "union", "json"})

#: the largest decimal each database declares (wider ones are text: no digit is lost)
_MAX_PRECISION = {"sqlite": 0, "postgres": 1000, "mysql": 65}
_MAX_SCALE = {"sqlite": 0, "postgres": 1000, "mysql": 30}


def sql_type(field: FieldType, database: str) -> str:
    """The column type of ``field`` on ``database`` (one of :data:`DATABASES`)."""
    spelled = SQL_TYPES[field.kind][DATABASES.index(database)]
    if field.kind == "decimal":
        precision, scale = field.precision or 38, field.scale or 0
        if precision > _MAX_PRECISION[database] or scale > _MAX_SCALE[database]:
            return SQL_TYPES["string"][DATABASES.index(database)]
        return spelled.format(p=precision, s=scale)
    return spelled
