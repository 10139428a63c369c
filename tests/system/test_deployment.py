"""Exactly once on the deployment people run: CeleryExecutor, Postgres metadata, a worker lost mid-publish.

``tests.support.deployment`` (what ``make deployment`` starts): Postgres metadata (the
session's server, a database of this test's own), a Redis broker, two Celery workers, the API
server, scheduler, DAG processor and triggerer as processes of their own, the local Event Hubs
endpoint, Azurite and a Spark standalone cluster, Airflow and the provider in a virtual environment
of their own into which the provider is installed from the wheel built from this checkout. Workers
reach the Variables backend's state only through the task execution API.

``airflow backfill create`` schedules three days of a publish DAG on each state backend
(``deployment_dags/eh_deployment_publish.py``) at once. Every task process of the workers is armed
to stop (SIGSTOP) once one SDK batch of a partition is acknowledged, through one claim file, so that
exactly one publish, whichever worker runs it, stops there: the test then SIGKILLs that worker with
its whole process group, as the OOM killer or a lost node would, and starts it again; the scheduler
is SIGKILLed and started again and the triggerer restarted while the backfills run. The new
scheduler adopts the dead one's tasks once that job's heartbeat is 30 s old, fails the lost task
once its own heartbeat is 30 s old and retries it; a task the killed worker had taken but not yet
started stays queued (its message comes back only after the broker's visibility timeout) until the
scheduler requeues it, 90 s after it was queued. Then each hub is read back: every day's events
exactly once, none lost. The same backfills again with ``--reprocess-behavior completed`` send
nothing. A run triggered through the REST API with good parameters publishes its day; one with bad
parameters is refused with a 400 naming the parameter, and creates no run.

Then a backfill of the example pipeline (``eh_daily_orders``: Spark on the deployment's Spark
cluster, Spark publish, ingestion into SQLite, the deferrable checkpoint sensor) on the same
workers, with a Spark executor's sender stopped mid-publish and the Celery worker of its driver
SIGKILLed, while the event-driven example (``eh_on_new_orders``) watches its hub and loads the orders
sent to it all along; ``EH_DEPLOYMENT_DAYS=14`` makes it the 14-day form.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sysconfig
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.testing.crash import CLAIM_ENV, PAUSE_ENV
from tests.support.databases import postgres_database
from tests.support.delivery_times import (
    Bursts,
    SinkSampler,
    check_within,
    delivery_times,
    sink_counts,
    wait_for_receivers,
)
from tests.support.deployment import Deployment, build_wheel, install
from tests.conftest import REPO, unique_name
from tests.support import prerequisites
from tests.support.delivery import DAG_ID, DELIVERY_BOUND, SAFETY_EVERY, WATCHER_GROUP
from tests.system.conftest import order_event_keys

DAG_FILE = Path(__file__).parent / "deployment_dags" / "eh_deployment_publish.py"
BACKENDS = ("blob", "variable")
ROWS = 1000
DAYS = ("2026-11-02", "2026-11-03", "2026-11-04")
REST_DAY = "2026-11-05"
PAUSED = "paused.pid"  # the claim file of the one publish stopped mid-send, beside the deployment's folder
SPARK_PAUSED = "spark-paused.pid"  # the same for the Spark executors' Python workers
PIPELINE_DAYS = int(os.environ.get("EH_DEPLOYMENT_DAYS", "1"))  # days of the example pipeline's backfill
LIVE_HUB = "orders-live"  # the hub eh_on_new_orders watches (deployment.HUBS)
# An event of the watched hub reaches the live table within the steady bound (tests/support/delivery.py),
# plus the safety run's minute for a stream's last burst, plus what the faults cost a run that loads it:
# a task on the killed worker fails for its heartbeat (30 s) and retries (10 s), its partition claim
# lapses (60 s); the scheduler's tasks are adopted by the next one (30 s).
LIVE_BOUND = DELIVERY_BOUND + SAFETY_EVERY + 130


@pytest.fixture(scope="module")
def deployment(postgres: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    prerequisites.require("redis")
    tmp_path = tmp_path_factory.mktemp("deployment")
    venv = tmp_path / "venv"
    site_packages = Path(sysconfig.get_path("purelib"))  # the checkout's .venv, installed from the same lock
    where = install(venv, build_wheel(tmp_path / "wheel"), share=site_packages)
    # the wheel's copy, not the checkout's package (the venv itself may sit inside the checkout: make test's temp dir)
    assert where.is_relative_to(venv) and not where.is_relative_to(REPO / "airflow_provider_eh")
    instance = Deployment(
        tmp_path / "deployment", venv, metadata_db=postgres_database(postgres, f"airflow_{uuid.uuid4().hex[:12]}"),
        dag_files=[DAG_FILE],
        worker_env={
            "PYTHONPATH": str(REPO / "tests" / "support" / "crash_site"),  # sitecustomize arms the point below
            PAUSE_ENV: "mid_send:1",
            CLAIM_ENV: str(tmp_path / PAUSED),
        },
        spark_worker_env={  # inherited by the executors' Python workers
            "PYTHONPATH": str(REPO / "tests" / "support" / "crash_site"),
            PAUSE_ENV: "mid_send:1",
            CLAIM_ENV: str(tmp_path / SPARK_PAUSED),
        },
        settings={"EH_EXAMPLE_SAFETY_SCHEDULE": "* * * * *"},  # the watcher's safety run every minute (SAFETY_EVERY)
    )
    try:
        instance.start()
        yield instance
    finally:
        instance.stop()


def dag_id(backend: str) -> str:
    return f"eh_deployment_publish_{backend}"


def backfill(deployment: Deployment, backend: str, hub: str, *more: str) -> None:
    created = deployment.airflow(
        "backfill", "create", "--dag-id", dag_id(backend), "--from-date", DAYS[0], "--to-date", DAYS[-1],
        "--dag-run-conf", json.dumps({"hub": hub, "rows": ROWS}), "--max-active-runs", "1", *more,
    )
    assert created.returncode == 0, created.stdout[-2000:] + created.stderr[-3000:]


def wait_for_backfills(deployment: Deployment, count: int, timeout: float,
                       dag_ids: tuple[str, ...] = tuple(dag_id(b) for b in BACKENDS)) -> None:
    """Wait until each DAG has ``count`` backfills, all completed, and every run succeeded (a failed run raises)."""
    deployment.api_client().wait_for_backfills(dag_ids, count, timeout)


def wait_for_pause(deployment: Deployment, claim: Path, timeout: float) -> int:
    """The PID of the task process stopped mid-send, once it has stopped."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid = int(claim.read_text())
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                return pid
        except (OSError, ValueError):
            pass
        deployment.api_client().check_alive()
        assert time.monotonic() < deadline, f"no publish reached mid_send:1 in {timeout} s"
        time.sleep(0.2)


def read_hub_of(deployment: Deployment, hub: str) -> list[Any]:
    from airflow_provider_eh.client.readback import read_hub

    return read_hub(EventHubsEndpoint.from_connection_string(deployment.event_hubs_connection_string(), hub))


def orders_in(deployment: Deployment, hub: str) -> Counter:
    return Counter(e.properties["order_id"] for e in read_hub_of(deployment, hub))


def expected(*days: str) -> Counter:
    return Counter(f"{day.replace('-', '')}-{n:05d}" for day in days for n in range(ROWS))


def publish_tries(deployment: Deployment, backend: str) -> list[int]:
    api = deployment.api_client()
    return [ti["try_number"] for run in api.runs(dag_id(backend))
            for ti in api.task_instances(dag_id(backend), run["dag_run_id"])]


def test_backfills_on_celery_with_a_worker_killed_mid_publish_publish_each_event_once(deployment: Deployment) -> None:
    hubs = {backend: unique_name(f"deploy-{backend}") for backend in BACKENDS}
    for hub in hubs.values():
        deployment.event_hubs_admin().create_hub(hub, partitions=2)
    api = deployment.api_client()
    for backend in BACKENDS:
        api.wait_for_dag(dag_id(backend), timeout=180)
    api.unpause(*(dag_id(backend) for backend in BACKENDS))  # paused when first parsed, as by Airflow's default

    for backend in BACKENDS:
        backfill(deployment, backend, hubs[backend])
    paused = wait_for_pause(deployment, deployment.root.parent / PAUSED, timeout=240)
    worker = deployment.component_of(paused)
    assert worker in ("worker-1", "worker-2"), f"the stopped publish {paused} is not a worker's task"
    deployment.kill(worker)  # the worker, its task supervisor and the stopped task, mid-send
    assert not Path(f"/proc/{paused}").exists()
    deployment.restart(worker)
    deployment.kill("scheduler")  # a crash: its job stays "running" in the database until its heartbeat is old
    deployment.restart("scheduler")
    deployment.restart("triggerer")
    wait_for_backfills(deployment, 1, timeout=420)

    tries = {backend: publish_tries(deployment, backend) for backend in BACKENDS}
    retried = [t for ts in tries.values() for t in ts if t > 1]  # the killed worker's tasks (1 or 2), each retried once
    assert retried and set(retried) == {2}, tries
    for backend in BACKENDS:
        assert orders_in(deployment, hubs[backend]) == expected(*DAYS), backend  # each event once, none lost

    for backend in BACKENDS:
        backfill(deployment, backend, hubs[backend], "--reprocess-behavior", "completed")
    wait_for_backfills(deployment, 2, timeout=300)
    for backend in BACKENDS:
        assert orders_in(deployment, hubs[backend]) == expected(*DAYS), backend  # the reprocessing sent nothing

    blob = dag_id("blob")
    before = len(api.runs(blob))
    for bad, named in (({"rows": 0}, "rows"), ({"hub": "no such hub!"}, "hub")):
        refused = api.post(f"/dags/{blob}/dagRuns", json={
            "logical_date": f"{REST_DAY}T00:00:00Z", "conf": {"hub": hubs["blob"], "rows": ROWS, **bad}})
        assert refused.status_code == 400, refused.text
        assert f"Invalid input for param {named}" in refused.text
    assert len(api.runs(blob)) == before
    triggered = api.post(f"/dags/{blob}/dagRuns", json={
        "logical_date": f"{REST_DAY}T00:00:00Z", "conf": {"hub": hubs["blob"], "rows": ROWS}})
    assert triggered.status_code == 200, triggered.text
    runs = api.wait_for_runs(blob, before + 1, timeout=180)
    assert [r["conf"] for r in runs if r["run_type"] == "manual"] == [{"hub": hubs["blob"], "rows": ROWS}]
    assert orders_in(deployment, hubs["blob"]) == expected(*DAYS, REST_DAY)
    assert orders_in(deployment, hubs["variable"]) == expected(*DAYS)


def generated_by_spark(deployment: Deployment, days: list[str]) -> Counter:
    """The order events ``(order_id, step)`` the runs' Spark jobs wrote for these intervals."""
    import pyarrow.parquet as pq

    generated: Counter = Counter()
    for day in days:
        rows = pq.read_table(deployment.root / "data" / "orders" / f"ds={day}").to_pylist()
        generated.update((row["order_id"], row["step"]) for row in rows)
    return generated


def loaded_into_sqlite(deployment: Deployment) -> Counter:
    with sqlite3.connect(deployment.root / "example.db") as conn:
        return Counter(conn.execute("SELECT order_id, step FROM analytics_order_events").fetchall())


# a day of the pipeline on the deployment's Spark cluster takes 2 to 4 minutes on a busy 2-core machine, the
# faulted one up to 9 (the lost task's heartbeat timeout, its retry waiting for the stopped sender's lease)
@pytest.mark.timeout(1200 + 600 * PIPELINE_DAYS)
def test_a_backfill_of_the_example_pipeline_across_a_worker_lost_mid_spark_publish_lands_each_event_once(
    deployment: Deployment,
) -> None:
    """``eh_daily_orders`` of ``dags/`` (Spark on the deployment's Spark cluster writes a day's orders,
    Spark publishes them, the analytics group loads them into SQLite, the deferrable sensor waits for
    its checkpoints; the events Avro against the order event's schema, registered in the deployment's
    Schema Registry), ``airflow backfill create`` over ``EH_DEPLOYMENT_DAYS`` days (1 by default; 14 for
    the long form). The Spark executor's Python worker sending one hub partition stops (SIGSTOP) once a
    batch is acknowledged, before the publish commits; the Celery worker running that publish's Spark
    driver is then SIGKILLed with its whole process group and started again, the scheduler SIGKILLed
    and started again, the triggerer restarted. The retry takes the partitions over and the stopped
    Python worker, continued after the backfill, sends nothing more. Then the hub and the SQL table
    hold each generated event once; a run with bad parameters is refused, naming the parameter, and
    creates no run. (The pipeline's days run again adding nothing is ``test_example_pipeline``'s; on
    Celery, the publish DAGs' test above runs a reprocessing backfill.)
    All along, ``eh_on_new_orders`` (unpaused, its safety run every minute) watches ``orders-live``,
    to which a few orders go every 20 s until the first backfill is done: each of their events is in
    ``live_order_events`` once, none later than ``LIVE_BOUND`` after it was sent."""
    (deployment.root.parent / PAUSED).touch(exist_ok=True)  # the Celery workers' own pause point is spent
    days = [str(date(2026, 11, 10) + timedelta(days=n)) for n in range(PIPELINE_DAYS)]
    hub = unique_name("deploy-orders")
    deployment.event_hubs_admin().create_hub(hub, partitions=2, consumer_groups=["analytics"])
    api = deployment.api_client()
    for dag in ("eh_daily_orders", DAG_ID):
        api.wait_for_dag(dag, timeout=180)
    api.unpause("eh_daily_orders", DAG_ID)  # the pipeline starts tomorrow: no catch-up, only the backfill
    wait_for_receivers(deployment.event_hubs_admin(), LIVE_HUB, WATCHER_GROUP, 2, alive=api.check_alive)
    live = EventHubsEndpoint.from_connection_string(deployment.event_hubs_connection_string(), LIVE_HUB)
    bursts, sampler = Bursts(live, orders=4, every=20), SinkSampler(deployment.root / "example.db", every=1.0)
    bursts.start()
    sampler.start()
    conf = json.dumps({"hub": hub, "rows": 20})
    created = deployment.airflow("backfill", "create", "--dag-id", "eh_daily_orders", "--from-date", days[0],
                                 "--to-date", days[-1], "--dag-run-conf", conf, "--max-active-runs", "1")
    assert created.returncode == 0, created.stdout[-2000:] + created.stderr[-3000:]

    stopped = wait_for_pause(deployment, deployment.root.parent / SPARK_PAUSED, timeout=600)
    assert deployment.component_of(stopped) == "spark-worker", "the stopped sender is not a Spark executor's"
    (publishing,) = [
        ti for run in api.runs("eh_daily_orders") for ti in api.task_instances("eh_daily_orders", run["dag_run_id"])
        if ti["task_id"] == "publish_orders" and ti["state"] == "running"
    ]
    worker = deployment.worker_running(publishing["id"])
    assert worker in ("worker-1", "worker-2"), f"no Celery worker's task process runs the publish {publishing['id']}"
    deployment.kill(worker)  # the Spark driver with it: the Spark master ends the application
    deployment.restart(worker)
    deployment.kill("scheduler")
    deployment.restart("scheduler")
    deployment.restart("triggerer")
    wait_for_backfills(deployment, 1, timeout=600 + 300 * PIPELINE_DAYS, dag_ids=("eh_daily_orders",))
    sent_at = bursts.close()
    try:
        os.kill(stopped, signal.SIGCONT)  # the stalled sender wakes up after its partitions were taken over
        time.sleep(5)
        os.kill(stopped, signal.SIGKILL)
    except ProcessLookupError:
        pass  # ended when its executor did, or once continued

    runs = api.runs("eh_daily_orders")
    assert sorted(r["data_interval_start"][:10] for r in runs) == days
    tries = {ti["try_number"] for ti in api.task_instances("eh_daily_orders", publishing["dag_run_id"])
             if ti["task_id"] == "publish_orders"}
    assert tries == {2}, tries  # the killed publish, retried once
    generated = generated_by_spark(deployment, days)
    assert len(generated) >= 40 * PIPELINE_DAYS
    landed = read_hub_of(deployment, hub)
    assert order_event_keys(landed) == generated  # each event once, none lost
    assert len({e.content_type for e in landed}) == 1 and landed[0].content_type.startswith("avro/binary+")  # one schema
    assert loaded_into_sqlite(deployment) == generated  # decoded from Avro by the analytics load

    before = len(api.runs("eh_daily_orders"))
    refused = api.post("/dags/eh_daily_orders/dagRuns", json={
        "logical_date": "2026-11-20T12:00:00Z", "conf": {"hub": hub, "rows": 0}})
    assert refused.status_code == 400, refused.text
    assert "Invalid input for param rows" in refused.text
    assert len(api.runs("eh_daily_orders")) == before

    # the watcher, through every fault above: each event in the live table once, none later than the bound
    deadline = time.monotonic() + LIVE_BOUND
    while set(sent_at) - set(sampler.seen) and time.monotonic() < deadline:
        api.check_alive()
        time.sleep(2)
    sampler.close()
    print(check_within(f"{DAG_ID} on the deployment", delivery_times(sent_at, sampler.seen, sent_at), LIVE_BOUND))
    assert sink_counts(deployment.root / "example.db") == Counter(list(sent_at))  # each once, nothing stranded
