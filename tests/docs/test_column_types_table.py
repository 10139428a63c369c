"""docs/reference/column-types.md holds the column-type table the sinks' mappings make (scripts/column_types_table.py)."""

from __future__ import annotations

import pytest

from tests.support.scripts import load_script


def _script():
    return load_script("column_types_table")


def test_the_column_types_page_holds_the_table_the_sinks_mappings_make() -> None:
    from airflow_provider_eh.client.schema_types import KINDS

    script = _script()
    assert script.main(["--check"]) == 0, "docs/reference/column-types.md differs from the code: run python scripts/column_types_table.py"
    page = script.PAGE.read_text()
    for kind in KINDS:  # every kind is a row
        assert f"\n| {kind} | " in page, kind
    assert "| decimal | `decimal` (bytes or fixed) / — | TEXT (`12.34`) | NUMERIC(p,s) | DECIMAL(p,s) | decimal(p,s) |" in page


def test_a_changed_mapping_makes_the_check_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_eh.ingest.sinks.sql import columns

    script = _script()
    monkeypatch.setitem(columns.SQL_TYPES, "uuid", ("TEXT", "TEXT", "CHAR(36)"))
    assert script.main(["--check"]) == 1
