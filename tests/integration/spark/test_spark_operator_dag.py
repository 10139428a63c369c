"""SparkToEventHubOperator through Airflow: ``dag.test()`` in a fresh process (as the publish operator's
DAG tests do); the Spark session comes from the ``spark_default`` connection (``local[2]``), the path is
templated on the interval, the XCom holds per partition counts and sequence numbers, nothing else."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

from spark_kit import outcome_of, run_dag_test, write_orders

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub

DAG_FILE = '''
import os
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

with DAG(dag_id="publish_spark_orders", schedule="@daily", start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
         catchup=False) as dag:
    SparkToEventHubOperator(
        task_id="publish",
        path=os.environ["EH_OUTPUT_ROOT"] + "/orders/{{ data_interval_start | ds }}",
        key_column="customer",
        property_columns=["region"],
        order_by=["id"],
        state_container=os.environ["EH_STATE_CONTAINER"],
        spark_conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4",
                    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"},
        claim_timeout=30,
    )
'''


def test_dag_run_publishes_the_interval_output_once_and_rerun_is_a_no_op(
    airflow_db: Path, connections: dict[str, str], container: str, event_hubs: Any, spark: Any, tmp_path: Path,
    monkeypatch: Any,
) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "publish_spark_orders.py").write_text(textwrap.dedent(DAG_FILE))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    monkeypatch.setenv("EH_OUTPUT_ROOT", str(tmp_path))
    monkeypatch.setenv("EH_STATE_CONTAINER", container)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    write_orders(spark, str(tmp_path / "orders" / "2026-06-01"), 3000)

    first = run_dag_test(dags / "publish_spark_orders.py", "2026-06-02T00:00:00+00:00")
    assert first.returncode == 0, first.stderr[-3000:]
    outcome = outcome_of(first)
    assert (outcome["state"], outcome["ti"]) == ("success", "success"), outcome["report"]
    returned = outcome["xcom"]["publish.return_value"]
    assert list(outcome["xcom"]) == ["publish.return_value"]
    assert sorted(returned) == ["0", "1", "2", "3"]
    assert all(set(v) == {"events", "first_seq", "last_seq", "service_last_sequence_number", "fencing",
                          "lease_only_batch_bytes", "status", "landed", "resent", "readback_seconds"}
               for v in returned.values())
    assert {v["status"] for v in returned.values()} == {"published"}
    assert {v["fencing"] for v in returned.values() if v["events"]} == {"hub"}  # executors sent on fenced links
    assert {v["lease_only_batch_bytes"] for v in returned.values() if v["events"]} == {None}  # no bound under the hub's
    assert sum(v["events"] for v in returned.values()) == 3000
    assert "with Spark (master local[2])" in first.stdout + first.stderr

    rerun = run_dag_test(dags / "publish_spark_orders.py", "2026-06-02T00:00:00+00:00")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    again = outcome_of(rerun)
    assert again["ti"] == "success", again["report"]
    # the same batch as the ledger recorded it, now said to be already committed
    recorded = ("events", "first_seq", "last_seq", "service_last_sequence_number", "fencing", "lease_only_batch_bytes")
    rerun_returned = again["xcom"]["publish.return_value"]
    assert ({pid: {k: v[k] for k in recorded} for pid, v in rerun_returned.items()}
            == {pid: {k: v[k] for k in recorded} for pid, v in returned.items()})
    assert {v["status"] for v in rerun_returned.values() if v["events"]} == {"already_committed"}
    assert "already committed" in rerun.stdout + rerun.stderr

    hub = connections["hub"]
    ids = Counter(json.loads(e.body)["id"]
                  for e in read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)))
    assert len(ids) == 3000 and set(ids.values()) == {1}
