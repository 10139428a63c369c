"""The streaming reader on a standalone cluster of two workers whose Python has no Airflow: the example application's
driver SIGKILLed five times mid-stream and the query restarted from its checkpoint; the parquet sink and the Delta
table each hold every event once, the application had executors on both workers, and Airflow was imported
nowhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_kit import SparkSetup
from test_spark_reader_crash import APP, crash_and_recover

from tests.support.spark_cluster import StandaloneCluster, submit


@pytest.mark.timeout(1500)
def test_driver_killed_five_times_on_a_two_worker_cluster_leaves_each_event_once(
        spark: Any, setup: SparkSetup, tmp_path: Path, spark_cluster: StandaloneCluster, airflow_free: Path,
        provider_zip: Path) -> None:
    # the streaming source's planner process on the driver is not given --py-files in client mode (PySpark 4.2):
    # the driver's PYTHONPATH carries the zip to it, as an installed wheel would
    driver_env = {"PYTHONPATH": str(provider_zip)}
    crash_and_recover(spark, setup, tmp_path, lambda config: submit(
        spark_cluster, APP, [str(config)], py_files=provider_zip, python=airflow_free, env=driver_env),
        per_partition=200, per_trigger=40, seed=2)
    # the applications had an executor on each worker (an executor works in <worker>/<application>/<id>)
    workers = {p.relative_to(spark_cluster.location).parts[0] for p in Path(spark_cluster.location).glob("worker-*/app-*/*")
               if p.is_dir()}
    assert workers == {"worker-0", "worker-1"}, workers
