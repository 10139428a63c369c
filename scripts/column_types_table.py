"""Write the column-type table of docs/reference/column-types.md from the sinks' own mappings, so the page and the code agree.

Each kind of schema field (``airflow_provider_eh/client/schema_types.py``) has a column type per SQL database
(``ingest/sinks/sql/columns.py``) and a Delta type (``ingest/sinks/delta/columns.py``). This script renders them
between the page's markers::

    python scripts/column_types_table.py          # rewrite the table in docs/reference/column-types.md
    python scripts/column_types_table.py --check  # exit 1 when the page differs from the code

``tests/docs/test_column_types_table.py`` runs the check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "reference" / "column-types.md"
BEGIN = "<!-- column-types: python scripts/column_types_table.py -->"
END = "<!-- /column-types -->"

#: how a producer's schema spells each kind
SPELLED = {
    "boolean": "`boolean` / `boolean`", "int": "`int` / —", "long": "`long` / `integer`", "float": "`float` / —",
    "double": "`double` / `number`", "string": "`string` / `string`", "bytes": "`bytes` / —", "fixed": "`fixed` / —",
    "enum": "`enum` / —", "decimal": "`decimal` (bytes or fixed) / —", "uuid": "`uuid` / `format: uuid`",
    "date": "`date` / `format: date`", "time-millis": "`time-millis` / —", "time-micros": "`time-micros` / `format: time`",
    "timestamp-millis": "`timestamp-millis` / —", "timestamp-micros": "`timestamp-micros` / `format: date-time`",
    "local-timestamp-millis": "`local-timestamp-millis` / —", "local-timestamp-micros": "`local-timestamp-micros` / —",
    "duration": "`duration` / —", "array": "`array` / `array`", "map": "`map` / —",
    "record": "`record` / `object` with `properties`", "union": "a union of several types / —",
    "json": "— / `object` without `properties`, several `type`s",
}
SQLITE_FORMS = {  # the text form SQLite holds, where it is text
    "decimal": "`12.34`", "uuid": "`12345678-...`", "date": "`2026-03-01`", "time-millis": "`08:30:00.123000`",
    "time-micros": "`08:30:00.123456`", "timestamp-millis": "`2026-03-01T00:00:30.217000+00:00`",
    "timestamp-micros": "`2026-03-01T00:00:30.217000+00:00`", "local-timestamp-millis": "`2026-03-01T09:00:00.005000`",
    "local-timestamp-micros": "`2026-03-01T09:00:00.005123`", "duration": "`P1M2DT3.003S`", "array": "JSON",
    "map": "JSON", "record": "JSON", "union": "JSON", "json": "JSON", "enum": "the symbol",
}


def render() -> str:
    """The table, from the code's mappings."""
    sys.path.insert(0, str(REPO))
    from airflow_provider_eh.client.schema_types import KINDS, FieldType
    from airflow_provider_eh.ingest.sinks.delta.columns import DELTA_TYPES
    from airflow_provider_eh.ingest.sinks.sql.columns import sql_type

    lines = ["| kind | Avro / JSON Schema | SQLite | Postgres | MySQL/MariaDB | Delta |",
             "| --- | --- | --- | --- | --- | --- |"]
    for kind in KINDS:
        field = FieldType(kind, precision=10, scale=2)
        sqlite = sql_type(field, "sqlite") + (f" ({SQLITE_FORMS[kind]})" if kind in SQLITE_FORMS else "")
        delta = DELTA_TYPES[kind].format(p="p", s="s", items="items", fields="fields")
        postgres = sql_type(field, "postgres").replace("(10,2)", "(p,s)")
        mysql = sql_type(field, "mysql").replace("(10,2)", "(p,s)")
        lines.append(f"| {kind} | {SPELLED[kind]} | {sqlite} | {postgres} | {mysql} | {delta} |")
    return "\n".join(lines)


def page_with_table(text: str) -> str:
    """``text`` with the table between its markers rendered anew."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"{PAGE} has no {BEGIN} ... {END} markers")
    return f"{head}{BEGIN}\n{render()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """Rewrite the table, or with ``--check`` say (exit 1) whether the page differs from the code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from the code")
    args = parser.parse_args(argv)
    text = PAGE.read_text()
    wanted = page_with_table(text)
    if args.check:
        return 0 if wanted == text else 1
    PAGE.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
