"""The SQL sink's column type for each kind of schema field, per database (no Airflow import).

A table the sink creates from an event's schema, and a column it adds when the schema gains a field, take these
types (``docs/reference/column-types.md`` shows them as a table, generated from :data:`SQL_TYPES`). Each kind lands as the
database's own type where it has one; nested values (records, arrays, maps, unions of several types) are JSON
(``JSONB`` on Postgres, ``JSON`` on MariaDB, JSON text on SQLite). SQLite has no decimal, UUID, date or time type:
those are text in the forms of :mod:`.values`, which SQLite's date and time functions read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

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

def json_fields(fields: Mapping[str, FieldType]) -> frozenset[str]:
    """The fields of JSON kinds: their columns take every value as JSON text."""
    return frozenset(name for name, kind in fields.items() if kind.kind in JSON_KINDS)


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


# -- what an existing column holds ---------------------------------------------------------------------------------

_ALL = frozenset(KINDS)
_INSTANTS = frozenset({"timestamp-millis", "timestamp-micros"})
_LOCAL = frozenset({"local-timestamp-millis", "local-timestamp-micros"})
#: a family of column types -> the kinds whose every value a column of it holds as that value (not rounded, not
#: reinterpreted): a field of another kind is a change of type the table cannot take
_HOLDS: dict[str, frozenset[str]] = {
    "text": _ALL,  # the text forms of :mod:`.values`
    "integer": frozenset({"boolean", "int", "long"}),
    "floating": frozenset({"int", "long", "float", "double"}),
    "decimal": frozenset({"int", "long", "decimal"}),
    "boolean": frozenset({"boolean"}),
    "binary": frozenset({"bytes", "fixed"}),
    "date": frozenset({"date"}),
    "time": frozenset({"time-millis", "time-micros"}),
    "instant": _INSTANTS,
    "local": _LOCAL,
    "datetime": _INSTANTS | _LOCAL,  # MySQL/MariaDB's DATETIME holds an instant in UTC and a local time alike
    "uuid": frozenset({"uuid"}),
    "interval": frozenset({"duration"}),
    "json": JSON_KINDS,
}
#: the first words of a declared type (lower case, as the catalog spells it) -> its family, per database
_FAMILIES: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "postgres": (
        (("smallint", "integer", "bigint"), "integer"), (("real", "double precision"), "floating"),
        (("numeric",), "decimal"), (("boolean",), "boolean"), (("bytea",), "binary"), (("date",), "date"),
        (("timestamp with time zone", "timestamp(", "timestamptz"), "instant"), (("timestamp",), "local"),
        (("time",), "time"), (("uuid",), "uuid"), (("interval",), "interval"), (("json", "jsonb"), "json"),
        (("text", "character", "varchar", "char", "citext", "name"), "text"),
    ),
    "mysql": (
        (("tinyint", "smallint", "mediumint", "int", "bigint"), "integer"), (("float", "double", "real"), "floating"),
        (("decimal", "numeric"), "decimal"), (("datetime", "timestamp"), "datetime"), (("date",), "date"),
        (("time",), "time"), (("json",), "json"),
        (("char", "varchar", "tinytext", "text", "mediumtext", "longtext"), "text"),
        (("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), "binary"),
    ),
}


@functools.lru_cache(maxsize=512)
def family(declared: str, database: str) -> str | None:
    """The family of a column's declared type (``None``: one the sink does not judge, e.g. a user-defined type);
    SQLite by its type affinity, its own rules: only ``INTEGER`` and ``REAL`` affinities refuse a kind."""
    text = declared.strip().lower()
    if database == "sqlite":
        if "int" in text:
            return "integer"
        textual = any(word in text for word in ("char", "clob", "text", "blob"))
        if not textual and any(word in text for word in ("real", "floa", "doub")):
            return "floating"
        return "text"
    if database == "postgres" and text.startswith("timestamp") and "without time zone" in text:
        return "local"
    for words, found in _FAMILIES[database]:
        if any(text == w or text.startswith((w + "(", w + " ")) or (w.endswith("(") and text.startswith(w))
               for w in words):
            return found
    return None


def holds(declared: str, field: FieldType, database: str) -> bool:
    """Whether a column of type ``declared`` holds every value of ``field`` as that value; a type the sink does not
    judge holds it (a value it refuses is then a dead letter). A decimal column holds a decimal of no larger scale
    (a larger one would be rounded); one with more integer digits than the column is a dead letter per value."""
    found = family(declared, database)
    if found is None:
        return True
    if field.kind not in _HOLDS[found] or (database == "postgres" and found == "integer" and field.kind == "boolean"):
        return False
    if found == "decimal" and field.kind == "decimal":
        scale = re.search(r"\(\s*\d+\s*,\s*(\d+)\s*\)", declared)
        return scale is None or (field.scale or 0) <= int(scale.group(1))
    return True
