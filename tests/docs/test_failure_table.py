"""docs/failures.md holds the fault table the fault matrix's cases make (scripts/failure_table.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


def _script():
    return load_script("failure_table")


def test_the_failure_page_holds_the_table_the_matrix_cases_make() -> None:
    script = _script()
    assert script.main(["--check"]) == 0, "docs/failures.md differs from the cases: run python scripts/failure_table.py"
    page = script.PAGE.read_text()
    cases = script.load_cases()
    assert len(cases.CELLS) > 40
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in page.splitlines() if line.startswith("| ")}
    for cell in cases.CELLS:  # every cell is in its fault's row: its path, its bound, what landed where unusual
        row = rows[cases.FAULTS[cell.fault].title]
        assert script.short_path(cell.path) in row, cell.id
        assert f"{cell.within:g}" in row.split(" | ")[3].split(" "), cell.id  # "15 s", or "15 to 45 s" over its paths
        assert cell.lands in row or f"| {script.short_path(cell.path)} | {cell.lands} |" in page, cell.id
    # a row per fault, not per cell; how each fault is made is in the evidence, not on the user's page
    assert len([r for r in rows if r in {f.title for f in cases.FAULTS.values()}]) == len(cases.FAULTS)
    assert "test_failure_matrix.py" not in page
    evidence = script.EVIDENCE.read_text()
    assert all(f"- **{f.title}**: {f.made_by}." in evidence for f in cases.FAULTS.values())


def test_a_changed_case_makes_the_check_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script()
    cases = (REPO / "tests" / "integration" / "failures" / "cases.py").read_text()
    changed = tmp_path / "cases.py"
    changed.write_text(cases.replace('"wrong SAS key"', '"a key that is not the namespace\'s"', 1))
    load = script.load_cases
    monkeypatch.setattr(script, "load_cases", lambda: load(changed))
    assert script.main(["--check"]) == 1
