"""Exactly once from a hub into tables: ``spark.readStream.format("eventhubs")`` into Spark's parquet file sink and, through
``foreachBatch``, into a Delta table keyed by the micro-batch id, the driver SIGKILLed five times mid-stream and the
queries restarted from their checkpoints; both tables hold each event once, and nothing is lost.

The application is the example's (``dags/spark_apps/read_event_hubs.py``) on a standalone cluster of two workers
whose Python has no Airflow (``airflow_free``), the provider a zip: once under ``spark-submit`` (the driver is the
application's process), once as the client of a Spark Connect server on that cluster (the driver is the server: it
is the server that is killed and started again, and the client that starts the queries again). The application
reports that Airflow was imported neither by the driver nor by a Python worker; its executors ran on both workers."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from azure.eventhub import EventData
from spark_kit import REPO, SparkSetup

from tests.support.spark_cluster import (
    StandaloneCluster,
    clean_environment,
    kill_session,
    submit,
)
from tests.support.spark_connect import SparkConnectServer

APP = REPO / "dags" / "spark_apps" / "read_event_hubs.py"
PARTITIONS, PER_PARTITION = ("0", "1", "2", "3"), 400
KILLS = 5


def committed_batches(folder: Path) -> int:
    """Micro-batches the parquet sink has committed (its ``_spark_metadata`` log)."""
    log = folder / "_spark_metadata"
    return len([f for f in log.iterdir() if f.name.isdigit()]) if log.is_dir() else 0


def wait_for_progress(folder: Path, more_than: int, proc: subprocess.Popen[str], timeout: float = 300) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = committed_batches(folder)
        if done > more_than:
            return done
        if proc.poll() is not None:
            raise AssertionError(f"the app ended (exit {proc.returncode}) mid-stream:\n"
                                 f"{proc.stdout.read()[-4000:] if proc.stdout else ''}")
        time.sleep(0.3)
    proc.kill()
    _, err = proc.communicate(30)
    raise AssertionError(f"no micro-batch committed past {more_than} in time:\n{(err or '')[-6000:]}")


def crash_and_recover(spark: Any, setup: SparkSetup, tmp_path: Path, start: Callable[[Path], Any], *,
                      per_partition: int, per_trigger: int, seed: int) -> None:
    """Fill the hub with ``per_partition`` events on each partition, start the application (``with start(config) as
    proc``: its process, whose driver is SIGKILLed when the block ends) with a trigger each second and
    ``per_trigger`` events a micro-batch, SIGKILL its driver :data:`KILLS` times once a micro-batch more is
    committed, then drain with ``availableNow`` (a larger limit): the parquet sink and the Delta table each hold every event once,
    and Airflow was imported neither by the driver nor by a Python worker."""
    from deltalake import DeltaTable

    with setup.endpoint.producer() as producer:
        for p in PARTITIONS:
            for first in range(0, per_partition, 200):
                producer.send_batch([EventData(f"{p}:{i}") for i in range(first, min(first + 200, per_partition))],
                                    partition_id=p)
    out, delta = tmp_path / "parquet", tmp_path / "delta"
    config = tmp_path / "app.json"
    settings = {"name": "orders-reader", "checkpoint": str(tmp_path / "checkpoint"), "parquet": str(out),
                "delta": str(delta), "trigger": "1 second",
                "options": {"connectionString": setup.event_hubs.connection_string(setup.hub), "consumerGroup": "analytics",
                            "maxEventsPerTrigger": str(per_trigger), "receiveTimeout": "60"}}
    config.write_text(json.dumps(settings))

    seen = 0
    committed_at_kill = []
    rng = random.Random(seed)
    for _ in range(KILLS):
        with start(config) as proc:  # the driver killed at the block's end
            seen = wait_for_progress(out, seen, proc)
            time.sleep(rng.uniform(0.2, 1.5))  # into the next micro-batch: reading, writing or committing
            committed_at_kill.append(committed_batches(out))

    # the rest in one micro-batch: a limit changed on restart bounds the micro-batches planned from then on, while
    # the one the last kill interrupted is read again over the range its offset log holds
    drain = {**settings["options"], "maxEventsPerTrigger": str(per_partition * len(PARTITIONS))}
    config.write_text(json.dumps({**settings, "trigger": "availableNow", "options": drain}))
    with start(config) as final:
        text, err = final.communicate(timeout=600)
    assert final.returncode == 0, (text + (err or ""))[-4000:]
    report = json.loads([line for line in text.splitlines() if line.startswith('{"read"')][-1])
    assert report["airflow_imported"] is False

    expected = Counter((p, i) for p in PARTITIONS for i in range(per_partition))
    rows = spark.read.parquet(str(out)).collect()  # through the sink's log: what Spark's readers see
    assert Counter((r.partition, r.sequenceNumber) for r in rows) == expected
    assert all(r.body == f"{r.partition}:{r.sequenceNumber}" for r in rows)
    table = DeltaTable(str(delta)).to_pyarrow_table(columns=["partition", "sequenceNumber"]).to_pylist()
    assert Counter((r["partition"], r["sequenceNumber"]) for r in table) == expected
    assert report["read"] == {"parquet": len(expected), "delta": len(expected)}
    # every kill came mid-stream, each run further than the one before
    assert len(committed_at_kill) == KILLS and committed_at_kill == sorted(committed_at_kill)
    assert committed_at_kill[-1] < len(expected) // per_trigger


def test_the_delta_sink_writes_a_micro_batch_run_again_once(spark: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from airflow_provider_eh.spark.datasource.delta_batches import DeltaBatchSink

    sink = DeltaBatchSink(str(tmp_path / "t"), app_id="orders-reader")
    batch = spark.range(3).selectExpr("cast(id as string) as partition", "id as sequenceNumber")
    sink(batch, 0)
    sink(batch, 0)  # Spark runs micro-batch 0 again after a crash before its commit log
    sink(batch.selectExpr("partition", "sequenceNumber + 3 as sequenceNumber"), 1)
    assert sorted(r["sequenceNumber"] for r in DeltaTable(str(tmp_path / "t")).to_pyarrow_table().to_pylist()) == list(range(6))
    assert sink.written_version() == 1


@pytest.mark.timeout(1500)
def test_driver_killed_five_times_on_a_two_worker_cluster_leaves_each_event_once(
        spark: Any, setup: SparkSetup, tmp_path: Path, spark_cluster: StandaloneCluster, airflow_free: Path,
        provider_zip: Path) -> None:
    # the streaming source's planner process on the driver is not given --py-files in client mode (PySpark 4.2):
    # the driver's PYTHONPATH carries the zip to it, as an installed wheel would
    driver_env = {"PYTHONPATH": str(provider_zip)}

    @contextmanager
    def submitted(config: Path) -> Iterator[subprocess.Popen[str]]:
        proc = submit(spark_cluster, APP, [str(config)], py_files=provider_zip, python=airflow_free, env=driver_env)
        try:
            yield proc
        finally:
            kill_session(proc.pid)  # the driver's JVM and every Python process it started
            proc.wait(60)

    crash_and_recover(spark, setup, tmp_path, submitted, per_partition=200, per_trigger=40, seed=2)
    assert executors_on(spark_cluster, since=set()) == {"worker-0", "worker-1"}


def executors_on(cluster: StandaloneCluster, since: set[str]) -> set[str]:
    """The workers that ran an executor of an application not in ``since`` (an executor works in
    ``<worker>/<application>/<id>``)."""
    return {p.relative_to(cluster.location).parts[0] for p in Path(cluster.location).glob("worker-*/app-*/*")
            if p.is_dir() and p.parent.name not in since}


@pytest.mark.timeout(1500)
def test_connect_server_killed_five_times_on_a_two_worker_cluster_leaves_each_event_once(
        spark: Any, setup: SparkSetup, tmp_path: Path, spark_cluster: StandaloneCluster, airflow_free: Path,
        provider_zip: Path) -> None:
    before = {p.name for p in Path(spark_cluster.location).glob("worker-*/app-*")}
    conf = {**spark_cluster.app_conf(), "spark.pyspark.python": str(airflow_free)}
    client_env = {**clean_environment(), "PYTHONPATH": str(REPO)}

    @contextmanager
    def through_connect(config: Path) -> Iterator[subprocess.Popen[str]]:
        server = SparkConnectServer(tmp_path / "connect", master=spark_cluster.url, python=str(airflow_free), conf=conf,
                                    py_files=[provider_zip], spark_home=spark_cluster.spark_home).start()
        client = subprocess.Popen([sys.executable, str(APP), str(config)], env={**client_env, "SPARK_REMOTE": server.url},
                                  cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            yield client
        finally:
            server.kill()  # the driver: the server's JVM and every Python process it started
            if client.poll() is None:  # the client, its server gone, has nothing left to do
                client.kill()
            client.wait(60)

    crash_and_recover(spark, setup, tmp_path, through_connect, per_partition=100, per_trigger=20, seed=3)
    assert executors_on(spark_cluster, since=before) == {"worker-0", "worker-1"}
