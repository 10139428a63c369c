"""Event-driven runs through ``airflow standalone``: events in the hub start runs of ``eh_on_new_orders``.

Standalone (scheduler with scheduled runs on: asset-triggered runs are created there; DAG processor;
triggerer) parses a DAGs folder holding only the example. Orders published to the hub make the
watcher's trigger fire within its batch window, and each run loads exactly the events its asset
events name into the SQLite sink. Mid-stream the triggerer is killed with SIGKILL (its trigger runner
too) and a new one is started: every published event is still in the sink exactly once, every
sequence number is named by some asset event (none lost), and events named twice stay within the
documented bound (the batches in flight at the kill) and were absorbed by the loader's dedupe.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from airflow_provider_eh.testing.events import event_dags_folder, kill_triggerer, publish_orders, start_triggerer, stop_group
from airflow_provider_eh.testing.ports import free_port
from airflow_provider_eh.testing.standalone import AirflowStandalone, standalone_env
from tests.conftest import unique_name
from tests.dags.conftest import ExampleStack, example_stack  # noqa: F401  (the fixture)

DAG_ID = "eh_on_new_orders"
BATCH_WINDOW = 5.0  # the example DAG's watcher
BATCH_SIZE = 50


@pytest.fixture
def live(example_stack: ExampleStack, tmp_path: Path) -> Iterator[tuple[AirflowStandalone, dict, str]]:
    hub = unique_name("live")
    example_stack.event_hubs.admin.create_hub(hub, partitions=2, consumer_groups=["airflow-watcher"])
    home = tmp_path / "airflow-home"
    home.mkdir()
    port = free_port()
    env = standalone_env(home, port, {**example_stack.env, "EH_EXAMPLE_EVENTS_HUB": hub})
    env.update({
        "AIRFLOW__CORE__DAGS_FOLDER": str(event_dags_folder(tmp_path / "dags")),
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "True",  # asset-triggered runs are created with scheduled ones
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "8",  # a killed triggerer's triggers move on soon
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
    })
    instance = AirflowStandalone(env, port, tmp_path / "standalone.log")
    extra: list = []
    try:
        instance.start()
        yield instance, env, hub, extra
    finally:
        for proc in extra:
            stop_group(proc)
        instance.stop()


def _sink(db: Path, hub_prefix: str) -> Counter:
    with sqlite3.connect(db) as conn:
        try:
            rows = conn.execute("SELECT order_id, step FROM live_order_events WHERE order_id LIKE ?", (f"{hub_prefix}-%",)).fetchall()
        except sqlite3.OperationalError:  # the table is created by the first run
            return Counter()
    return Counter(rows)


def _wait(condition, timeout: float, what: str, airflow: AirflowStandalone) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout} s\n{airflow.tail()}")
        time.sleep(1)


def _asset_events(airflow: AirflowStandalone, hub: str) -> list[dict]:
    response = airflow.get("/assets/events", limit=1000, order_by="timestamp")
    response.raise_for_status()
    return [e["extra"]["payload"] for e in response.json()["asset_events"]
            if (e.get("extra") or {}).get("payload", {}).get("eventhub") == hub]


def test_events_start_runs_that_load_each_event_once_across_a_triggerer_kill(example_stack: ExampleStack, live) -> None:  # type: ignore[no-untyped-def]
    airflow, env, hub, extra = live
    endpoint = example_stack.endpoint(hub)
    airflow.wait_for_dag(DAG_ID)
    time.sleep(3)  # the triggerer picks the watcher up on its next loop

    sent_at = time.time()
    published = publish_orders(endpoint, "w1", 4)  # 12 events
    _wait(lambda: sum(_sink(example_stack.db, "w1").values()) == published, 120, "wave 1 in the sink", airflow)
    first = _asset_events(airflow, hub)
    assert first, "no asset event"
    fired_at = datetime.fromisoformat(airflow.get("/assets/events", limit=1).json()["asset_events"][0]["timestamp"]).timestamp()
    assert fired_at - sent_at < BATCH_WINDOW + 15, "the first asset event came later than the batch window allows"

    # mid-stream: events arrive, the triggerer dies without a chance to flush, more events arrive, a new one starts
    published += publish_orders(endpoint, "w2", 20)
    time.sleep(BATCH_WINDOW / 2)
    assert kill_triggerer(airflow.proc.pid), "no triggerer process found"
    published += publish_orders(endpoint, "w3", 20)
    extra.append(start_triggerer(env, airflow.log.with_name("triggerer-2.log")))

    def all_loaded() -> bool:
        airflow.check_alive()
        return sum((_sink(example_stack.db, "w1") + _sink(example_stack.db, "w2") + _sink(example_stack.db, "w3")).values()) >= published

    _wait(all_loaded, 150, "every event in the sink", airflow)
    sink = _sink(example_stack.db, "w1") + _sink(example_stack.db, "w2") + _sink(example_stack.db, "w3")
    assert len(sink) == published and set(sink.values()) == {1}, "an event is missing or loaded twice"

    runs = airflow.wait_for_runs(DAG_ID, 1, timeout=120)
    written = 0
    for run in runs:
        xcom = airflow.get(f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances/report/xcomEntries/return_value")
        if xcom.status_code == 200:
            written += xcom.json()["value"]["rows_written"]
    assert written == published, "each event is written by exactly one run"

    # none lost by the trigger: every sequence number is named by an asset event; repeats only the batches in flight
    payloads = _asset_events(airflow, hub)
    named: Counter = Counter()
    for payload in payloads:
        for pid, r in payload["partitions"].items():
            named.update((pid, s) for s in range(r["first"], r["last"] + 1))
    assert sum(1 for _ in named) == published, "a published event was never named by an asset event"
    repeated = sum(n - 1 for n in named.values())
    assert repeated <= published - 12, f"{repeated} events fired twice: more than the batches in flight at the kill"

    # the watcher's group is checkpointed in the SDK's layout up to the end of each partition
    from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore

    blob = json.loads(env["AIRFLOW_CONN_WASB_DEFAULT"])["extra"]["connection_string"]
    store = BlobCheckpointStore.from_connection_string(blob, "eh-example-checkpoints")
    last = {pid: max(s for p, s in named if p == pid) for pid, _ in named}

    def checkpointed() -> bool:
        got = {c["partition_id"]: c["sequence_number"]
               for c in store.list_checkpoints(endpoint.fully_qualified_namespace, hub, "airflow-watcher")}
        return got == last

    _wait(checkpointed, 30, f"the watcher's checkpoints at {last}", airflow)
