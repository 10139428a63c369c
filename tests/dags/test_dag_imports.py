"""Every example DAG imports without errors and without touching services at parse time."""

from __future__ import annotations

from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"


def test_every_dag_file_imports_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS), safe_mode=False)
    assert bag.import_errors == {}
    files = {Path(dag.fileloc).name for dag in bag.dags.values()}
    assert files == {p.name for p in DAGS.glob("*.py") if not p.name.startswith("_")}
