"""``df.writeStream.format("eventhubs")`` under ``spark-submit`` on ``local[2]``: the driver killed mid-send five
times and restarted from its checkpoint; the hub holds each row once, and nothing is lost.

The driver runs the cluster tests' Python without Airflow (``airflow_free``), the provider a ``--py-files``
zip, its JVM started from the class archive those tests share (six driver starts: the archive saves a
third of each JVM's start)."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_kit import REPO, SparkSetup

from tests.support.spark_cluster import (
    clean_environment,
    jvm_options,
    kill_session,
    paused_env,
    spark_class_archive,
    spark_home_of,
)

APP = REPO / "dags" / "spark_apps" / "publish_to_event_hubs.py"
FILES, ROWS_PER_FILE = 6, 1000
KILLS = 5


def write_input(folder: Path) -> Path:
    """``FILES`` parquet files of orders, written without Spark (the stream's source, one file per micro-batch)."""
    folder.mkdir(parents=True)
    for f in range(FILES):
        ids = list(range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "customer": [f"customer-{i % 101}" for i in ids],
                                 "region": pa.array([i % 7 for i in ids], pa.int32())}), folder / f"part-{f:03d}.parquet")
    return folder


def submit(python: Path, provider_zip: Path, config: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """The app under ``spark-submit`` (``local[2]``) of ``python``'s Spark, in a session of its own: the driver JVM
    and its Python."""
    home = spark_home_of(python)
    jvm = jvm_options(spark_class_archive(python))
    argv = [str(home / "bin" / "spark-submit"), "--master", "local[2]", "--py-files", str(provider_zip),
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", f"spark.driver.extraJavaOptions={jvm}", str(APP), str(config)]
    return subprocess.Popen(argv, env={**env, "SPARK_HOME": str(home), "PYSPARK_PYTHON": str(python)}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 240) -> int:
    """The PID a paused process wrote into its claim file; fails if the app ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text().strip())
        if proc.poll() is not None:
            raise AssertionError(f"the app ended (exit {proc.returncode}) before pausing mid-send:\n"
                                 f"{proc.stdout.read()[-4000:] if proc.stdout else ''}")
        time.sleep(0.2)
    raise AssertionError("the app did not reach mid-send in time")


# six driver starts on a loaded machine: each restart waits for its JVM and for the killed driver's lease
@pytest.mark.timeout(1800)
def test_stream_driver_killed_mid_send_five_times_lands_each_row_once(setup: SparkSetup, tmp_path: Path,
                                                                     airflow_free: Path, provider_zip: Path) -> None:
    config = tmp_path / "app.json"
    config.write_text(json.dumps({
        "input": str(write_input(tmp_path / "orders")),
        "stream": {"checkpoint": str(tmp_path / "checkpoint"), "files_per_trigger": 1},
        "options": {"connectionString": setup.event_hubs.connection_string(setup.hub),
                    "stateConnectionString": setup.azurite.connection_string, "stateContainer": setup.container_name,
                    "producerGroup": "orders.stream", "keyColumn": "customer", "orderBy": "id",
                    "propertyColumns": "region", "claimTimeout": "90"},
    }))
    base = {**clean_environment(), "SPARK_LOCAL_IP": "127.0.0.1"}
    landed_before_kill: list[int] = []
    for kill in range(KILLS):
        claim = tmp_path / f"paused-{kill}"
        proc = submit(airflow_free, provider_zip, config, {**base, **paused_env(provider_zip, claim)})
        try:
            wait_for(claim, proc)
            landed_before_kill.append(sum(n + 1 for n in setup.ends().values()))
        finally:
            kill_session(proc.pid)  # the driver: its JVM and every Python process it started
            proc.wait(60)

    final = submit(airflow_free, provider_zip, config, base)
    out, _ = final.communicate(timeout=600)
    assert final.returncode == 0, out[-4000:]
    done = [json.loads(line) for line in out.splitlines() if line.startswith('{"published"')]
    assert done and done[-1]["airflow_imported"] is False, out[-4000:]

    ids = Counter(json.loads(e.body)["id"] for e in setup.read_back())
    assert ids == Counter(range(FILES * ROWS_PER_FILE)), (
        f"{sum(ids.values())} events for {len(ids)} ids; duplicated: {[i for i, n in ids.items() if n > 1][:10]}")
    # every kill came after events of an uncommitted micro-batch were acknowledged (the pause point), so each
    # restart recovered a batch in doubt by reading the hub back; and each run got further than the one before
    assert len(landed_before_kill) == KILLS
    assert landed_before_kill == sorted(set(landed_before_kill)) and landed_before_kill[0] > 0

