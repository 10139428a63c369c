"""The provider's Spark engine on a cluster whose Python has no Airflow, as a Spark cluster is.

A standalone master and two workers (``spark_cluster``) run a Python of their own with PySpark and the
Azure SDK and no Airflow (``airflow_free``); the provider reaches them only as a zip built from the
checkout (``provider_zip``). A probe application, submitted with ``spark-submit`` and run through a
Spark Connect server on the same cluster, imports the engine (``airflow_provider_eh.spark``,
``.publishing``, ``.client.endpoint``) in every task's Python worker and reports what it found.

Then the ``eventhubs`` data source on that cluster, through the example application
(``dags/spark_apps/publish_to_event_hubs.py``) submitted by ``SparkSubmitOperator`` as an Airflow task
runs it (:func:`~tests.support.spark_cluster.submit_with_operator`): its driver killed mid-send and an
executor killed in the retry that recovers; a driver stalled mid-send (one of its two commit processes)
while another try takes over; a
driver cut off from blob storage mid-send while another try takes over; a write through Spark Connect.
Each time the hub is read back and holds each row once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_kit import SparkSetup

from tests.support.proxy import FaultProxy
from tests.support.spark_cluster import (
    STARTING_UI,
    StandaloneCluster,
    clean_environment,
    kill_driver,
    kill_session,
    paused_env,
    submit,
    submit_with_operator,
)
from tests.support.spark_connect import SparkConnectServer

PROBE_APP = Path(__file__).with_name("apps") / "probe_app.py"
TASKS = 8


@pytest.fixture(scope="module")
def connect_on_cluster(spark_cluster: StandaloneCluster, airflow_free: Path, provider_zip: Path,
                       tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A Spark Connect server whose master is the cluster, run from the cluster's Spark, its executors
    given the provider's zip."""
    conf = {**spark_cluster.app_conf(), "spark.pyspark.python": str(airflow_free)}
    with SparkConnectServer(tmp_path_factory.mktemp("spark-connect"), master=spark_cluster.url, python=str(airflow_free),
                            conf=conf, py_files=[provider_zip], spark_home=spark_cluster.spark_home) as server:
        yield server


def report_of(out: str, err: str, what: str) -> dict[str, Any]:
    """The probe's JSON (its last line of output)."""
    lines = out.strip().splitlines()
    assert lines and lines[-1].startswith("{"), f"{what} printed no report:\n{out[-2000:]}\n{err[-6000:]}"
    return json.loads(lines[-1])


def assert_every_task_ran_without_airflow(tasks: list[dict[str, Any]], cluster: StandaloneCluster, python: Path,
                                          provider_zip: Path) -> None:
    """Each task ran in ``python`` on one of the cluster's two workers, imported the engine from the zip,
    and found no Airflow, neither loaded by the engine nor importable; both workers took part."""
    assert len(tasks) == TASKS
    for task in tasks:
        assert task["executable"] == str(python), task
        assert task["airflow_loaded_by_engine"] == [], f"the engine imported Airflow on an executor: {task}"
        assert task["airflow"] is None, f"Airflow is importable on an executor: {task}"
        assert f"{provider_zip.name}/airflow_provider_eh/" in task["provider"], task
    # an executor works in <worker's work dir>/<application>/<executor id>
    executors = {Path(task["cwd"]).relative_to(cluster.location).parts[:3] for task in tasks}
    assert {executor[0] for executor in executors} == {"worker-0", "worker-1"}, executors
    assert len(executors) == 2, executors


def test_a_submitted_job_runs_on_two_workers_whose_python_has_no_airflow(
    spark_cluster: StandaloneCluster, airflow_free: Path, provider_zip: Path,
) -> None:
    proc = submit(spark_cluster, PROBE_APP, [str(TASKS)], py_files=provider_zip, python=airflow_free)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-6000:]
    report = report_of(out, err, "spark-submit of the probe")
    driver = report["driver"]
    assert (driver["executable"], driver["airflow"], driver["airflow_loaded_by_engine"]) == (str(airflow_free), None, [])
    assert_every_task_ran_without_airflow(report["tasks"], spark_cluster, airflow_free, provider_zip)


def test_spark_connect_on_the_cluster_runs_python_without_airflow(
    spark_cluster: StandaloneCluster, connect_on_cluster: SparkConnectServer, airflow_free: Path, provider_zip: Path,
) -> None:
    # the client is this environment's Python (pyspark-client's gRPC and pandas); the tasks run on the cluster's
    run = subprocess.run([sys.executable, str(PROBE_APP), str(TASKS), connect_on_cluster.url], capture_output=True,
                         text=True, timeout=300, env=clean_environment(), cwd=connect_on_cluster.location)
    assert run.returncode == 0, run.stderr[-6000:] + connect_on_cluster.tail()
    report = report_of(run.stdout, run.stderr, "the Spark Connect probe")
    assert_every_task_ran_without_airflow(report["tasks"], spark_cluster, airflow_free, provider_zip)


# ---- the eventhubs data source on the cluster ------------------------------------------------------------------

PUBLISH_APP = Path(__file__).resolve().parents[3] / "dags" / "spark_apps" / "publish_to_event_hubs.py"
ROWS = 12_000


def publish_config(setup: SparkSetup, tmp_path: Path, name: str, **options: str) -> Path:
    """The example application's settings: ``ROWS`` orders as parquet in 6 files, the test's hub and container."""
    folder = tmp_path / "orders"
    if not folder.exists():
        folder.mkdir()
        for f in range(6):
            ids = list(range(f * ROWS // 6, (f + 1) * ROWS // 6))
            pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "customer": [f"c-{i % 97}" for i in ids],
                                     "region": pa.array([i % 7 for i in ids], pa.int32())}), folder / f"part-{f}.parquet")
    config = tmp_path / f"{name}.json"
    config.write_text(json.dumps({"input": str(folder), "options": {
        "connectionString": setup.event_hubs.connection_string(setup.hub),
        "stateConnectionString": setup.azurite.connection_string, "stateContainer": setup.container_name,
        "producerGroup": "orders.cluster", "batchId": "2026-05-01/2026-05-02", "keyColumn": "customer",
        "orderBy": "id", "propertyColumns": "region", "claimTimeout": "120", **options}}))
    return config


def wait_for_claim(claim: Path, proc: subprocess.Popen[str], timeout: float = 300) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if claim.exists() and claim.read_text().strip():
            return int(claim.read_text())
        if proc.poll() is not None:
            raise AssertionError(f"the job ended (exit {proc.returncode}) before pausing:\n{proc.stderr.read()[-4000:]}")
        time.sleep(0.2)
    raise AssertionError("the job's driver did not reach mid-send in time")


def finish(task: subprocess.Popen[str], timeout: float = 420) -> dict[str, Any]:
    """Wait for a :func:`submit_with_operator` task to succeed; what the application printed it published."""
    try:
        out, err = task.communicate(timeout=timeout)
    finally:
        kill_session(task.pid)  # a job that did not end in time, and the daemons of one that did
    assert task.returncode == 0, f"exit {task.returncode}\n{out[-2000:]}\n{err[-6000:]}"
    return app_result(out + err)


def app_result(output: str) -> dict[str, Any]:
    """The application's last line, ``{"published": ...}``, out of the operator's log of the job's output."""
    decoder = json.JSONDecoder()
    for line in reversed(output.splitlines()):
        if '{"published"' in line:
            return decoder.raw_decode(line[line.index('{"published"'):])[0]
    raise AssertionError(f"the application reported nothing:\n{output[-4000:]}")


def publish(cluster: StandaloneCluster, config: Path, python: Path, provider_zip: Path,
            env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """An Airflow task's ``SparkSubmitOperator`` submitting the example application with ``config`` (a try of it)."""
    return submit_with_operator(cluster, PUBLISH_APP, [str(config)], py_files=provider_zip, python=python, env=env)


def command_line(process: psutil.Process) -> list[str]:
    """A process's command line; none for one that ended (a zombie, a worker forked and gone) meanwhile."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def kill_an_executor_while_tasks_run(cluster: StandaloneCluster, proc: subprocess.Popen[str], timeout: float = 240) -> int:
    """SIGKILL one of the submitted job's executors (not another application's, the Connect server's) as soon as
    its tasks' Python workers run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            apps = [app["id"] for app in cluster.status().get("activeapps", [])
                    if app.get("name") == "publish-to-event-hubs"]  # the name the application gives its session
        except STARTING_UI:  # the master's UI slow to answer on a loaded machine: ask again
            apps = []
        for app_id in apps:
            for pid in cluster.executor_pids(app_id):
                try:
                    running = psutil.Process(pid).children(recursive=True)
                except psutil.Error:
                    continue
                if any("pyspark.daemon" in " ".join(command_line(child)) for child in running):
                    os.kill(pid, signal.SIGKILL)
                    return pid
        time.sleep(0.1)
    raise AssertionError("the job's tasks never ran")


def hub_ids(setup: SparkSetup) -> Counter:
    return Counter(json.loads(e.body)["id"] for e in setup.read_back())


def test_data_source_driver_killed_mid_send_then_an_executor_killed_in_the_retry_publishes_each_row_once(
    spark_cluster: StandaloneCluster, airflow_free: Path, provider_zip: Path, setup: SparkSetup, tmp_path: Path,
) -> None:
    config = publish_config(setup, tmp_path, "publish")
    # the first try sends one partition at a time: each partition's rows fit in one SDK batch, so with all of them
    # at once the others could all land before the paused driver stops; so the driver stops with some landed
    one_at_a_time = publish_config(setup, tmp_path, "publish-one-at-a-time", maxWorkers="1")
    first = publish(spark_cluster, one_at_a_time, airflow_free, provider_zip,
                    env=paused_env(provider_zip, tmp_path / "paused"))
    try:
        wait_for_claim(tmp_path / "paused", first)
        in_doubt = sum(n + 1 for n in setup.ends().values())
        assert kill_driver(first), "the task had started no driver"
        out, err = first.communicate(timeout=120)
    finally:
        kill_session(first.pid)
    assert 0 < in_doubt < ROWS, f"{in_doubt} events had landed when the driver was killed"
    assert first.returncode != 0 and "TASK SUCCEEDED" not in out, "the task succeeded although its driver was killed"
    assert "Cannot execute" in out + err, (out + err)[-3000:]  # the operator's error for a failed spark-submit

    retry = publish(spark_cluster, config, airflow_free, provider_zip)  # Airflow's retry of the task
    try:
        killed = kill_an_executor_while_tasks_run(spark_cluster, retry)
    except BaseException:
        kill_session(retry.pid)
        raise
    result = finish(retry)
    assert killed and result["airflow_imported"] is False
    assert hub_ids(setup) == Counter(range(ROWS)), "the retry after the killed driver lost or duplicated rows"

    ends = setup.ends()
    finish(publish(spark_cluster, config, airflow_free, provider_zip))  # a clear and re-run of the task
    assert setup.ends() == ends, "a re-run of the same identity sent events"


def test_data_source_driver_stalled_mid_send_while_another_run_takes_over_lands_each_row_once(
    spark_cluster: StandaloneCluster, airflow_free: Path, provider_zip: Path, setup: SparkSetup, tmp_path: Path,
) -> None:
    config = publish_config(setup, tmp_path, "stalled")
    # the stalled try commits from two processes: the one that stalls mid-send holds half the partitions
    two = publish_config(setup, tmp_path, "stalled-two-processes", commitProcesses="2")
    stalled = publish(spark_cluster, two, airflow_free, provider_zip, env=paused_env(provider_zip, tmp_path / "paused"))
    try:
        paused = wait_for_claim(tmp_path / "paused", stalled)
        # another try of the same identity (the stalled task's worker presumed lost): waits for the stalled
        # driver's leases, claims, recovers, commits
        finish(publish(spark_cluster, config, airflow_free, provider_zip))
        assert hub_ids(setup) == Counter(range(ROWS))
        os.kill(paused, signal.SIGCONT)  # the stalled driver wakes up mid-send, fenced
        out, err = stalled.communicate(timeout=300)
    finally:
        kill_session(stalled.pid)
    assert stalled.returncode != 0, "the stalled driver's write succeeded after another run took over"
    assert "ProducerDisconnectedError" in out + err or "fenced" in out + err, (out + err)[-4000:]
    assert hub_ids(setup) == Counter(range(ROWS)), "the stalled driver landed events after the takeover"


def test_data_source_through_spark_connect_on_the_cluster_publishes_each_row_once(
    connect_on_cluster: SparkConnectServer, setup: SparkSetup, tmp_path: Path,
) -> None:
    config = publish_config(setup, tmp_path, "connect")
    client = (
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        "from airflow_provider_eh.spark.datasource import EventHubsDataSource\n"
        "spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
        "spark.dataSource.register(EventHubsDataSource)\n"
        "config = json.load(open(sys.argv[2]))\n"
        "for _ in range(2):\n"
        "    spark.read.parquet(config['input']).write.format('eventhubs').mode('append')"
        ".options(**config['options']).save()\n"
        "print('published')\n"
    )
    env = {**clean_environment(), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    run = subprocess.run([sys.executable, "-c", client, connect_on_cluster.url, str(config)], capture_output=True,
                         text=True, timeout=420, env=env, cwd=connect_on_cluster.location)
    assert run.returncode == 0, run.stderr[-6000:] + connect_on_cluster.tail()
    assert hub_ids(setup) == Counter(range(ROWS)), "written twice through Spark Connect: each row once expected"


def test_data_source_driver_cut_off_from_blob_storage_mid_send_lands_each_row_once(
    spark_cluster: StandaloneCluster, airflow_free: Path, provider_zip: Path, setup: SparkSetup, tmp_path: Path,
) -> None:
    port = setup.azurite.port
    config = publish_config(setup, tmp_path, "direct")
    with FaultProxy("127.0.0.1", port) as proxy:
        cut = publish_config(setup, tmp_path, "through-proxy", stateConnectionString=setup.azurite.connection_string.replace(
            f":{port}/", f":{proxy.port}/"))
        setup.event_hubs.admin.set_fault("delay_ack", hub=setup.hub, ms=400)  # a send long enough to cut into
        first = publish(spark_cluster, cut, airflow_free, provider_zip)
        try:
            deadline = time.monotonic() + 300
            while sum(n + 1 for n in setup.ends().values()) == 0:
                assert first.poll() is None and time.monotonic() < deadline, "the first run never sent"
                time.sleep(0.1)
            proxy.freeze()  # its blob traffic: held from now on (lease renewals, the commit), connections open
            setup.event_hubs.admin.clear_faults()
            finish(publish(spark_cluster, config, airflow_free, provider_zip))
            assert hub_ids(setup) == Counter(range(ROWS))
        finally:
            proxy.thaw()
            setup.event_hubs.admin.clear_faults()
        out, err = first.communicate(timeout=300)
        kill_session(first.pid)
    assert first.returncode != 0, "the run cut off from its blob storage committed after another run took over"
    assert hub_ids(setup) == Counter(range(ROWS)), "the run cut off from blob storage landed events twice"
