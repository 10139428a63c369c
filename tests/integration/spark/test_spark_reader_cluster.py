"""The streaming reader on a standalone cluster of two workers whose Python has no Airflow: the example application's
driver SIGKILLed five times mid-stream and the query restarted from its checkpoint; the parquet sink and the Delta
table each hold every event once, the tasks ran on both workers, and Airflow was imported nowhere."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from azure.eventhub import EventData
from spark_kit import REPO, SparkSetup
from test_spark_reader_crash import committed_batches, wait_for_progress

from tests.support.spark_cluster import StandaloneCluster, kill_session, submit

APP = REPO / "dags" / "spark_apps" / "read_event_hubs.py"
PARTITIONS, PER_PARTITION = ("0", "1", "2", "3"), 200
KILLS = 5


@pytest.mark.timeout(1500)
def test_driver_killed_five_times_on_a_two_worker_cluster_leaves_each_event_once(
        spark: Any, setup: SparkSetup, tmp_path: Path, spark_cluster: StandaloneCluster, airflow_free: Path,
        provider_zip: Path) -> None:
    from deltalake import DeltaTable

    with setup.endpoint.producer() as producer:
        for p in PARTITIONS:
            producer.send_batch([EventData(f"{p}:{i}") for i in range(PER_PARTITION)], partition_id=p)
    out, delta = tmp_path / "parquet", tmp_path / "delta"
    config = tmp_path / "app.json"
    settings = {"name": "orders-cluster", "checkpoint": str(tmp_path / "checkpoint"), "parquet": str(out),
                "delta": str(delta), "trigger": "1 second",
                "options": {"connectionString": setup.event_hubs.connection_string(setup.hub),
                            "consumerGroup": "analytics", "maxEventsPerTrigger": "40", "receiveTimeout": "60"}}
    config.write_text(json.dumps(settings))

    # the streaming source's planner process on the driver is not given --py-files in client mode (PySpark 4.2):
    # the driver's PYTHONPATH carries the zip to it, as an installed wheel would
    driver_env = {"PYTHONPATH": str(provider_zip)}
    seen, committed_at_kill = 0, []
    rng = random.Random(2)
    for _ in range(KILLS):
        proc = submit(spark_cluster, APP, [str(config)], py_files=provider_zip, python=airflow_free, env=driver_env)
        try:
            seen = wait_for_progress(out, seen, proc)
            time.sleep(rng.uniform(0.2, 1.5))
            committed_at_kill.append(committed_batches(out))
        finally:
            kill_session(proc.pid)
            proc.wait(60)

    config.write_text(json.dumps({**settings, "trigger": "availableNow"}))
    final = submit(spark_cluster, APP, [str(config)], py_files=provider_zip, python=airflow_free, env=driver_env)
    text, err = final.communicate(timeout=600)
    assert final.returncode == 0, err[-4000:]
    report = json.loads([line for line in text.splitlines() if line.startswith('{"read"')][-1])
    assert report["airflow_imported"] is False

    expected = Counter((p, i) for p in PARTITIONS for i in range(PER_PARTITION))
    rows = spark.read.parquet(str(out)).collect()
    assert Counter((r.partition, r.sequenceNumber) for r in rows) == expected
    table = DeltaTable(str(delta)).to_pyarrow_table(columns=["partition", "sequenceNumber"]).to_pylist()
    assert Counter((r["partition"], r["sequenceNumber"]) for r in table) == expected
    assert len(committed_at_kill) == KILLS and committed_at_kill == sorted(committed_at_kill)
    assert committed_at_kill[-1] < len(expected) // 40
    # the applications had an executor on each worker (an executor works in <worker>/<application>/<id>)
    workers = {p.relative_to(spark_cluster.location).parts[0] for p in Path(spark_cluster.location).glob("worker-*/app-*/*")
               if p.is_dir()}
    assert workers == {"worker-0", "worker-1"}, workers
