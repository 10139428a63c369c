"""The daily pipeline the way people start with it: ``airflow standalone``, a run triggered through the REST API.

``airflow standalone`` (API server, scheduler, DAG processor, triggerer, LocalExecutor) runs on
127.0.0.1 with an Airflow home and ports of its own (``tests.support.standalone``) and a Postgres
metadata database, as a deployment has. A run with a parameter out of range is refused; a run
triggered with ``conf`` publishes its day, and the hub holds the day's events exactly once. Scheduled
runs are off (``use_job_schedule``) so that catchup adds no runs of its own; only the processes this
test started are stopped (their process group). ``airflow backfill create`` beside the scheduler, and
a reprocessing backfill adding nothing, are the deployment test's (``test_deployment.py``, on Celery
and Postgres); the same days run twice through ``dag.test()`` are ``test_example_pipeline.py``'s.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import postgres_database
from eventhubs_local.ports import free_port
from tests.support.standalone import AirflowStandalone, standalone_env
from tests.system.conftest import ExampleStack, order_event_keys

DAG_ID = "eh_daily_orders"
ROWS = 6
REST_LOGICAL_DATE = "2026-11-03T12:00:00Z"  # a manual run processes the last full day before it: 2026-11-02
DAYS = ["2026-11-02"]


@pytest.fixture
def airflow(example_stack: ExampleStack, postgres: str, tmp_path: Path) -> Iterator[AirflowStandalone]:
    home = tmp_path / "airflow-home"
    home.mkdir()
    port = free_port()
    metadata_db = postgres_database(postgres, f"airflow_{uuid.uuid4().hex[:12]}")
    env = standalone_env(home, port, example_stack.env, metadata_db=metadata_db)
    instance = AirflowStandalone(env, port, tmp_path / "standalone.log")
    try:
        instance.start()
        yield instance
    finally:
        instance.stop()


def test_a_rest_triggered_run_with_conf_publishes_its_day_once_and_bad_conf_is_refused(
    example_stack: ExampleStack, airflow: AirflowStandalone
) -> None:
    import pyarrow.parquet as pq

    from airflow_provider_eh.client.readback import read_hub

    airflow.wait_for_dag(DAG_ID)
    assert not (Path(airflow.env["AIRFLOW_HOME"]) / "airflow.db").exists()  # the metadata is in Postgres
    conf = {"hub": example_stack.hub, "rows": ROWS}

    refused = airflow.client.post(f"/dags/{DAG_ID}/dagRuns", json={"logical_date": REST_LOGICAL_DATE, "conf": {**conf, "rows": 0}})
    assert refused.status_code == 400
    assert "Invalid input for param rows: 0 is less than the minimum of 1" in refused.text

    triggered = airflow.client.post(f"/dags/{DAG_ID}/dagRuns", json={"logical_date": REST_LOGICAL_DATE, "conf": conf})
    assert triggered.status_code == 200, triggered.text
    (run,) = airflow.wait_for_runs(DAG_ID, 1, timeout=600)
    assert run["conf"] == conf and run["data_interval_start"].startswith(DAYS[0])
    generated = Counter(
        (row["order_id"], row["step"])
        for day in DAYS for row in pq.read_table(example_stack.data_dir / "orders" / f"ds={day}").to_pylist()
    )
    landed = read_hub(example_stack.endpoint())
    assert order_event_keys(landed) == generated  # each event once, none lost
    assert len({e.content_type for e in landed}) == 1 and landed[0].content_type.startswith("avro/binary+")
