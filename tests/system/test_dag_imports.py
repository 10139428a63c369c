"""Every example DAG imports without errors and without touching services at parse time."""

from __future__ import annotations

from pathlib import Path


DAGS = Path(__file__).resolve().parents[2] / "dags"


def test_every_dag_file_imports_without_errors() -> None:
    from airflow.dag_processing.dagbag import BundleDagBag

    # as the DAG processor and the task runner parse: the bundle's folder is importable (dags/_orders.py)
    bag = BundleDagBag(dag_folder=str(DAGS), bundle_path=DAGS, safe_mode=False)
    assert bag.import_errors == {}
    files = {Path(dag.fileloc).name for dag in bag.dags.values()}
    assert files == {p.name for p in DAGS.glob("*.py") if not p.name.startswith("_")}
    assert {"eh_daily_orders", "eh_ingest_orders", "eh_quickstart", "eh_health_check"} <= set(bag.dag_ids)


def test_ingest_dag_is_scheduled_on_the_hub_asset_the_publish_task_outputs() -> None:
    from airflow.dag_processing.dagbag import BundleDagBag

    dags = BundleDagBag(dag_folder=str(DAGS), bundle_path=DAGS, safe_mode=False).dags
    daily, ingest = dags["eh_daily_orders"], dags["eh_ingest_orders"]
    (hub,) = daily.get_task("publish_orders").outlets
    assert hub.uri == "eventhubs://127.0.0.1:5672/orders"
    assert [asset.uri for asset in ingest.timetable.asset_condition.objects] == [hub.uri]
    (files,) = daily.get_task("generate_orders").outlets
    assert files.uri.startswith("file:///") and files.uri.endswith("/data/orders")
    assert daily.get_task("publish_orders").inlets == [files]
    assert ingest.get_task("load_orders").inlets == daily.get_task("load_analytics").inlets == [hub]
