"""``eh_spark_backfill_read`` through ``dag.test()``: ``SparkSubmitOperator`` submits the example application, which reads
one day's events with ``Trigger.AvailableNow`` between the interval's enqueued times into the interval's parquet folder;
the day of the events reads each once, and a re-run of it (both ``dag.test()`` calls in one process) writes no file.
(That an interval's enqueued times bound what it reads is the batch reader's test, ``test_spark_reader.py``, with no
Airflow run around it.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.eventhub import EventData
from spark_kit import REPO, SparkSetup

RUNNER = """
import json, sys
from datetime import datetime
from pathlib import Path

from airflow.dag_processing.dagbag import BundleDagBag
from airflow_provider_eh.testing.dag_test import failed_tasks

dags = Path(sys.argv[1])
dag = BundleDagBag(dag_folder=str(dags / "eh_spark_backfill_read.py"), bundle_path=dags).get_dag("eh_spark_backfill_read")
for _ in range(int(sys.argv[4])):  # the day, then its re-run
    run = dag.test(logical_date=datetime.fromisoformat(sys.argv[2]), run_conf=json.loads(sys.argv[3]))
    print("RESULT " + json.dumps({"state": str(run.state), "failed": failed_tasks(run)}), flush=True)
    folder = Path(json.loads(sys.argv[3])["data_dir"]) / "lakehouse" / "backfill"
    print("FILES " + json.dumps(sorted(str(f.relative_to(folder)) for f in folder.rglob("*.parquet"))), flush=True)
"""


def run_day(tmp_path: Path, day: datetime, conf: dict[str, Any], times: int) -> list[dict[str, Any]]:
    """``dag.test()`` of the day ``times`` times in one process: each run's result and the interval's parquet files
    after it."""
    runner = tmp_path / "run_dag.py"
    runner.write_text(RUNNER)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable,
           "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    done = subprocess.run([sys.executable, str(runner), str(REPO / "dags"), day.isoformat(), json.dumps(conf), str(times)],
                          capture_output=True, text=True, timeout=900, env=env)
    results = [json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    files = [json.loads(line[len("FILES "):]) for line in done.stdout.splitlines() if line.startswith("FILES ")]
    assert len(results) == len(files) == times, f"exit {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    for result in results:
        assert result["state"] == "success", f"{result}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return [{**result, "files": found} for result, found in zip(results, files)]


@pytest.mark.timeout(900)
def test_backfill_reads_each_event_of_its_interval_once_and_a_rerun_adds_nothing(
        airflow_db: Path, connections: dict[str, str], setup: SparkSetup, spark: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    with setup.endpoint.producer() as producer:
        for p in ("0", "1", "2", "3"):
            producer.send_batch([EventData(f"{p}:{i}") for i in range(30)], partition_id=p)
    monkeypatch.setenv("EH_CONNECTION_STRING", setup.event_hubs.connection_string(setup.hub))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    conf = {"hub": setup.hub, "data_dir": str(tmp_path / "data"), "max_events_per_trigger": 50}
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    folder = tmp_path / "data" / "lakehouse" / "backfill"

    # a run's interval is the day before its date: the events' day, then its re-run
    first, rerun = run_day(tmp_path, today + timedelta(days=1), conf, times=2)
    assert first["files"] and rerun["files"] == first["files"]  # the re-run wrote no file
    rows = spark.read.parquet(str(folder / f"ds={today.date()}")).collect()
    assert sorted((r.partition, r.sequenceNumber) for r in rows) == [(p, i) for p in "0123" for i in range(30)]
    assert all(r.body == f"{r.partition}:{r.sequenceNumber}" for r in rows)
