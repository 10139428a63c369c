"""Event-driven runs through ``airflow standalone``: events in the hub start runs of ``eh_on_new_orders``.

Standalone (scheduler with scheduled runs on: asset-triggered runs are created there; DAG processor;
triggerer) parses a DAGs folder holding only the example. Orders published once the watcher's
receivers are open start a run within the batch window. Then a publisher sends orders steadily, and
the triggerer (its supervisor and its trigger runner) is killed with SIGKILL provably mid-stream: it
is stopped (SIGSTOP) and killed only when, at that instant, an asset event of this stream is stored,
some stored asset event is not yet checkpointed (so it must fire again), some published events have
not fired yet, and the publisher is still sending; otherwise it is continued and looked at again.
A new triggerer takes over. Then every published event is in the sink exactly once (read back),
every sequence number is named by an asset event (none lost), and the events named twice are exactly
those the killed triggerer had stored but not checkpointed: the asset events of about its last
state-sync round. The runs wrote each event once although those events were named twice.
Last, a stranded asset event's effect, made for certain: with the triggerer stopped, orders that no
asset event names reach the sink through the DAG's safety run (every minute here) alone.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_provider_eh.testing.events import event_dags_folder, order_events, start_triggerer, stop_group, triggerer_pids
from airflow_provider_eh.testing.ports import free_port
from airflow_provider_eh.testing.standalone import AirflowStandalone, standalone_env
from tests.conftest import unique_name
from tests.system.conftest import ExampleStack, example_stack  # noqa: F401  (the fixture)

DAG_ID = "eh_on_new_orders"
WATCHER_GROUP = "airflow-watcher"
BATCH_WINDOW = 5.0  # the example DAG's watcher
# How long after the events a stored asset event may come (the triggerer syncs with the DB every second)
# and a run may be queued (the scheduler loop, heartbeat 2 s here); generous for a loaded 2-core machine.
STORE_SLACK = 5.0
RUN_SLACK = 15.0
# The documented bound: what fires twice was stored in about the triggerer's last state-sync round
# (one second) before the crash; allowed here with room for a loaded machine.
LAST_SYNC_ROUNDS = 5.0
ORDERS_AT_MOST = 200  # the steady publisher's cap (3 events an order)
SAFETY_EVERY = 60.0  # EH_EXAMPLE_SAFETY_SCHEDULE below


@dataclass
class Live:
    airflow: AirflowStandalone
    env: dict[str, str]
    hub: str
    home: Path
    extra: list = field(default_factory=list)


@pytest.fixture
def live(example_stack: ExampleStack, tmp_path: Path) -> Iterator[Live]:
    hub = unique_name("live")
    example_stack.event_hubs.admin.create_hub(hub, partitions=2, consumer_groups=[WATCHER_GROUP])
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
        "EH_EXAMPLE_SAFETY_SCHEDULE": "* * * * *",  # the safety run: every minute
    })
    instance = AirflowStandalone(env, port, tmp_path / "standalone.log")
    state = Live(instance, env, hub, home)
    try:
        instance.start()
        yield state
    finally:
        for proc in state.extra:
            stop_group(proc)
        instance.stop()


@dataclass(frozen=True)
class Stored:
    """An asset event of the watched hub in the metadata DB."""

    id: int
    at: float  # POSIX time it was stored
    partitions: dict[str, dict[str, int]]

    def named(self) -> set[tuple[str, int]]:
        return {(p, s) for p, r in self.partitions.items() for s in range(r["first"], r["last"] + 1)}


def _stored(home: Path, hub: str) -> list[Stored]:
    """The hub's asset events, read from the metadata DB (a short lock timeout: raises when it is busy)."""
    with sqlite3.connect(home / "airflow.db", timeout=2) as conn:
        rows = conn.execute("SELECT id, timestamp, extra FROM asset_event ORDER BY id").fetchall()
    out = []
    for row_id, stamp, extra in rows:
        payload = (json.loads(extra) if isinstance(extra, str) else extra or {}).get("payload") or {}
        if payload.get("eventhub") == hub:
            at = datetime.fromisoformat(str(stamp))
            at = at if at.tzinfo else at.replace(tzinfo=timezone.utc)
            out.append(Stored(row_id, at.timestamp(), payload["partitions"]))
    return out


def _sink(db: Path, *prefixes: str) -> Counter:
    """How often each ``(order_id, step)`` of these order prefixes is in the sink table."""
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            rows = conn.execute("SELECT order_id, step FROM live_order_events").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # the table is created by the first run
                return Counter()
            raise
    return Counter((o, int(s)) for o, s in rows if o.split("-")[0] in prefixes)


def _wait(condition, timeout: float, what: str, airflow: AirflowStandalone) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except sqlite3.OperationalError:  # a database busy with a writer: look again
            pass
        airflow.check_alive()
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout} s\n{airflow.tail()}")
        time.sleep(0.5)


def _gone(pids: list[int]) -> bool:
    """None of ``pids`` runs (a zombie waiting for its parent to reap it does not)."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def _posix(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class SteadyPublisher(threading.Thread):
    """Sends orders (3 events each, one SDK batch, keyed by order) one after another until stopped."""

    def __init__(self, endpoint: Any, prefix: str, pace: float = 0.3):
        super().__init__(daemon=True)
        self.endpoint, self.prefix, self.pace = endpoint, prefix, pace
        self.sent = 0  # events the service acknowledged
        self.keys: list[tuple[str, int]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from azure.eventhub import EventData

        events = order_events(self.prefix, ORDERS_AT_MOST)
        try:
            with self.endpoint.producer() as producer:
                for start in range(0, len(events), 3):
                    if self.stop.is_set():
                        return
                    order = events[start:start + 3]
                    batch = producer.create_batch(partition_key=order[0][1]["order_id"])
                    for body, props in order:
                        event = EventData(json.dumps(body))
                        event.properties = props
                        batch.add(event)
                    producer.send_batch(batch)
                    self.keys.extend((props["order_id"], props["step"]) for _, props in order)
                    self.sent += len(order)
                    self.stop.wait(self.pace)  # a steady rate, not a wait for anything
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_events_start_runs_that_load_each_event_once_across_a_triggerer_kill(example_stack: ExampleStack, live: Live) -> None:
    from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore

    from airflow_provider_eh.testing.events import publish_orders

    airflow, hub = live.airflow, live.hub
    endpoint = example_stack.endpoint(hub)
    blob = json.loads(live.env["AIRFLOW_CONN_WASB_DEFAULT"])["extra"]["connection_string"]
    store = BlobCheckpointStore.from_connection_string(blob, "eh-example-checkpoints")

    def checkpoints() -> dict[str, int]:
        return {c["partition_id"]: c["sequence_number"]
                for c in store.list_checkpoints(endpoint.fully_qualified_namespace, hub, WATCHER_GROUP)}

    airflow.wait_for_dag(DAG_ID)
    _wait(lambda: {r["partition"] for r in example_stack.event_hubs.admin.receivers(hub)
                   if r["consumer_group"].lower() == WATCHER_GROUP} == {"0", "1"},
          180, "the watcher's receivers on both partitions", airflow)

    # Wave 1: a run within the batch window
    sent_at = time.time()
    published = publish_orders(endpoint, "w1", 4)  # 12 events: fewer than a batch, so the window fires it
    # (a safety run may load it first: the asset event and its run come all the same)
    _wait(lambda: sum(_sink(example_stack.db, "w1").values()) == published and _stored(live.home, hub)
          and any(r["run_type"] == "asset_triggered" for r in airflow.runs(DAG_ID)), 180, "wave 1 in the sink", airflow)
    first = _stored(live.home, hub)
    assert first[0].at - sent_at <= BATCH_WINDOW + STORE_SLACK, "the asset event came later than the batch window allows"
    run = min((r for r in airflow.runs(DAG_ID) if r["run_type"] == "asset_triggered"), key=lambda r: r["run_after"])
    assert sent_at <= _posix(run["run_after"]) and _posix(run["queued_at"]) - sent_at <= BATCH_WINDOW + RUN_SLACK, (
        f"the run was queued {_posix(run['queued_at']) - sent_at:.1f} s after the events were published"
    )
    wave1, wave1_events = published, len(first)

    # Wave 2, steady; the kill lands provably mid-stream
    publisher = SteadyPublisher(endpoint, "w2")
    publisher.start()
    killed = None
    deadline = time.monotonic() + 180
    while killed is None:
        airflow.check_alive()
        assert publisher.is_alive() and time.monotonic() < deadline, (
            f"no moment to kill the triggerer mid-stream (publisher error: {publisher.error})\n{airflow.tail()}"
        )
        pids = triggerer_pids(airflow.proc.pid)
        assert pids, "no triggerer process found"
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            stored, checkpointed, sent = _stored(live.home, hub), checkpoints(), publisher.sent
        except sqlite3.OperationalError:  # the stopped triggerer holds a write lock: look again later
            stored, checkpointed, sent = [], {}, 0
        named = set().union(*(s.named() for s in stored)) if stored else set()
        unchecked = {(p, s) for p, s in named if s > checkpointed.get(p, -1)}
        mid_stream = len(stored) > wave1_events and publisher.is_alive() and wave1 + sent > len(named)
        if mid_stream and unchecked:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            killed = (time.time(), stored, sent, pids)
        else:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
            time.sleep(0.3)
    kill_time, before_kill, sent_at_kill, killed_pids = killed
    # The checkpoints the killed triggerer left: read once its processes are gone (a blob write it had
    # sent before it was stopped has then landed or been dropped)
    _wait(lambda: _gone(killed_pids), 30, "the killed triggerer gone", airflow)
    left = checkpoints()
    named_at_kill = set().union(*(e.named() for e in before_kill))
    unchecked_at_kill = {(p, s) for p, s in named_at_kill if s > left.get(p, -1)}
    assert unchecked_at_kill, f"every stored asset event was checkpointed at the kill ({left})"

    live.extra.append(start_triggerer(live.env, airflow.log.with_name("triggerer-2.log")))
    _wait(lambda: len(_stored(live.home, hub)) > len(before_kill), 180, "an asset event from the new triggerer", airflow)
    publisher.stop.set()
    publisher.join(30)
    assert publisher.error is None, publisher.error
    assert publisher.sent > sent_at_kill, "nothing was published after the kill"
    published += publisher.sent

    # Every published event in the sink, exactly once (read back from the sink)
    wanted = {(props["order_id"], props["step"]) for _, props in order_events("w1", 4)} | set(publisher.keys)
    _wait(lambda: sum(_sink(example_stack.db, "w1", "w2").values()) >= published, 300, "every event in the sink", airflow)
    runs = airflow.wait_for_runs(DAG_ID, 1, timeout=300)
    sink = _sink(example_stack.db, "w1", "w2")
    assert set(sink) == wanted and set(sink.values()) == {1}, "an event is missing from the sink or loaded twice"

    written = 0
    for run in runs:
        xcom = airflow.get(f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances/report/xcomEntries/return_value")
        if xcom.status_code == 200:
            written += xcom.json()["value"]["rows_written"]
    assert written == published, "each event is written by exactly one run"

    # None lost by the trigger; what fired twice is exactly what the killed triggerer stored but had not
    # checkpointed, and that was stored in about its last state-sync round
    stored = _stored(live.home, hub)
    named_count: Counter = Counter()
    for event in stored:
        named_count.update(event.named())
    assert len(named_count) == published, "a published event was never named by an asset event"
    twice = {key for key, n in named_count.items() if n > 1}
    assert twice == unchecked_at_kill and set(named_count.values()) <= {1, 2}, (
        f"fired twice: {sorted(twice)}; stored but not checkpointed at the kill: {sorted(unchecked_at_kill)}"
    )
    refired = [e for e in before_kill if e.named() & twice]
    assert refired and all(kill_time - e.at <= LAST_SYNC_ROUNDS for e in refired), (
        f"re-fired asset events stored {[round(kill_time - e.at, 1) for e in refired]} s before the kill"
    )
    assert written == published < sum(named_count.values()), "the sink absorbed the repeated ranges"

    # The watcher's group is checkpointed in the SDK's layout up to the end of each partition
    last = {pid: max(s for p, s in named_count if p == pid) for pid, _ in named_count}
    _wait(lambda: checkpoints() == last, 60, f"the watcher's checkpoints at {last}", airflow)

    # A stranded asset event, made for certain: no triggerer, so no asset event names wave 3; the
    # safety run (no asset events: up to the hub's end) loads it within its schedule
    for proc in live.extra:
        stop_group(proc)
    live.extra.clear()
    stored_before = len(_stored(live.home, hub))
    runs_before = {r["dag_run_id"] for r in airflow.wait_for_runs(DAG_ID, 1, timeout=300)}
    wave3 = publish_orders(endpoint, "w3", 3)
    _wait(lambda: sum(_sink(example_stack.db, "w3").values()) == wave3, SAFETY_EVERY + RUN_SLACK + 120,
          "wave 3 in the sink through a safety run", airflow)
    assert len(_stored(live.home, hub)) == stored_before, "an asset event named wave 3 (the triggerer was stopped)"
    later = [r for r in airflow.wait_for_runs(DAG_ID, 1, timeout=300) if r["dag_run_id"] not in runs_before]
    assert later and {r["run_type"] for r in later} == {"scheduled"}, [(r["dag_run_id"], r["run_type"]) for r in later]
    wrote = 0
    for run in later:
        xcom = airflow.get(f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances/report/xcomEntries/return_value")
        assert xcom.status_code == 200 and xcom.json()["value"]["ranges"] == {}, xcom.text
        wrote += xcom.json()["value"]["rows_written"]
    sink = _sink(example_stack.db, "w1", "w2", "w3")
    assert wrote == wave3 and set(sink.values()) == {1} and sum(sink.values()) == published + wave3
