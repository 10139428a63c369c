"""``eh_spark_submit_publish`` through ``dag.test()``: ``SparkSubmitOperator`` submits the example application,
which publishes the interval's orders with the ``eventhubs`` data source; the run reads what the job committed
from the ledger, loads it and waits for the consumer group's checkpoints: each order event of the day is in the
hub once, and the run succeeds. (The same application under ``SparkSubmitOperator`` killed, retried, stalled
and re-run: tests/integration/spark/test_spark_cluster_without_airflow.py.)"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pyarrow.parquet as pq
import pytest

from airflow_provider_eh.client.readback import read_hub
from tests.system.conftest import ExampleStack, explain, order_event_keys

RUN_DATES = ["2026-11-03"]
DAYS = ["2026-11-02"]


@pytest.mark.timeout(1200)  # a dag.test run: a Spark task, a spark-submit, a load and a deferred wait
def test_submitted_job_publishes_the_interval_once_and_the_run_waits_for_its_consumers(
        example_stack: ExampleStack) -> None:
    conf = {"hub": example_stack.hub, "rows": 10}
    first, proc = example_stack.run("eh_spark_submit_publish", RUN_DATES, conf)
    assert [r.get("state") for r in first] == ["success"] * len(RUN_DATES), explain(first, proc)
    log = proc.stdout + proc.stderr
    assert "events committed, per partition" in log
    generated = [row for day in DAYS for row in pq.read_table(example_stack.data_dir / "orders" / f"ds={day}").to_pylist()]
    events = read_hub(example_stack.endpoint())
    assert order_event_keys(events) == {(r["order_id"], r["step"]): 1 for r in generated}
    assert {json.loads(e.body)["customer_id"] for e in events} == {r["customer_id"] for r in generated}
    # the consumer group loaded what the job published, once; the sensor then saw its checkpoints reach it
    with sqlite3.connect(example_stack.db) as conn:
        loaded = Counter(conn.execute("SELECT order_id, step FROM analytics_order_events").fetchall())
    assert loaded == Counter(order_event_keys(events)), "the consumer group did not load the published events once"
