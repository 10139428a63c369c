"""How long each event of the event-driven example (``eh_on_new_orders``) takes to reach its sink.

What its ``airflow standalone`` tests share (on the dev environment's Airflow and on the floor's):
the hub and the settings the example runs with, a publisher that sends orders steadily and records
when the service acknowledged each event, a sampler that records when each event first shows in
``live_order_events``, and the check of those delivery times against a bound.

The bound: an event of a steady stream is in a batch the watcher fires within its batch window; the
scheduler queues the asset event's run within ``RUN_SLACK``; the run's two tasks (each a process that
Airflow starts) create the table and load the event within ``LOAD_TIME``. That makes
``DELIVERY_BOUND``, 60 s, room enough on a loaded 2-core machine. A stranded asset event (an Airflow
scheduler race) costs its events one batch window more, until the next batch's run loads them from
the SQL checkpoint; only the stream's last batch, which no later event follows, waits for the safety
run: ``SAFETY_EVERY + DELIVERY_BOUND``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from airflow_provider_eh.testing.events import event_dags_folder, order_events, send_order
from tests.conftest import unique_name

DAG_ID = "eh_on_new_orders"
WATCHER_GROUP = "airflow-watcher"
SINK_TABLE = "live_order_events"
BATCH_WINDOW = 5.0  # the example DAG's watcher
RUN_SLACK = 15.0  # from the asset event to its run queued (the scheduler's loop, heartbeat 2 s here)
LOAD_TIME = 40.0  # from the run queued to the event written: two task processes, the table, the load
DELIVERY_BOUND = BATCH_WINDOW + RUN_SLACK + LOAD_TIME
SAFETY_EVERY = 60.0  # EH_EXAMPLE_SAFETY_SCHEDULE below
# The stream's last batch: the events sent in its last two batch windows (a batch fires at most one
# window after its first event)
LAST_BATCH = 2 * BATCH_WINDOW

Key = tuple[str, int]  # (order_id, step)


def create_watched_hub(event_hubs: Any, prefix: str) -> str:
    """A hub of 2 partitions of the test's own with the watcher's consumer group; its name."""
    hub = unique_name(prefix)
    event_hubs.admin.create_hub(hub, partitions=2, consumer_groups=[WATCHER_GROUP])
    return hub


def standalone_settings(hub: str, dags: Path) -> dict[str, str]:
    """The settings the example runs with under ``airflow standalone``: a DAGs folder holding only it,
    runs on schedule (asset-triggered runs are created with scheduled ones), short heartbeats, and the
    safety run every minute."""
    return {
        "EH_EXAMPLE_EVENTS_HUB": hub,
        "EH_EXAMPLE_SAFETY_SCHEDULE": "* * * * *",
        "AIRFLOW__CORE__DAGS_FOLDER": str(event_dags_folder(dags)),
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "True",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "8",  # a killed triggerer's triggers move on soon
    }


def wait_for(condition: Any, timeout: float, what: str, airflow: Any) -> None:
    """Wait until ``condition()`` holds (a database busy with a writer: look again), checking that
    ``airflow`` is alive; fail with its log's tail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except sqlite3.OperationalError:
            pass
        airflow.check_alive()
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout} s\n{airflow.tail()}")
        time.sleep(0.5)


def wait_for_watcher(airflow: Any, event_hubs: Any, hub: str, timeout: float = 180) -> None:
    """Wait until the watcher's receivers are open on both partitions of ``hub``."""
    wait_for(lambda: {r["partition"] for r in event_hubs.admin.receivers(hub)
                      if r["consumer_group"].lower() == WATCHER_GROUP} == {"0", "1"},
             timeout, "the watcher's receivers on both partitions", airflow)


def sink_counts(db: Path, *prefixes: str, timeout: float = 30) -> Counter:
    """How often each ``(order_id, step)`` is in the sink table (of these order prefixes, or all)."""
    with sqlite3.connect(db, timeout=timeout) as conn:
        try:
            rows = conn.execute(f"SELECT order_id, step FROM {SINK_TABLE}").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # the table is created by the first run
                return Counter()
            raise
    return Counter((o, int(s)) for o, s in rows if not prefixes or o.split("-")[0] in prefixes)


def publish_timed(endpoint: Any, prefix: str, orders: int) -> dict[Key, float]:
    """Send the orders' events as :func:`~airflow_provider_eh.testing.events.publish_orders` does;
    when the service acknowledged each (POSIX time)."""
    events, sent_at = order_events(prefix, orders), {}
    with endpoint.producer() as producer:
        for start in range(0, len(events), 3):
            _send_timed(producer, events[start:start + 3], sent_at)
    return sent_at


def _send_timed(producer: Any, order: list[tuple[dict[str, Any], dict[str, Any]]], sent_at: dict[Key, float]) -> None:
    """Send one order and record in ``sent_at`` when the service acknowledged its events."""
    send_order(producer, order)
    now = time.time()
    sent_at.update({(props["order_id"], props["step"]): now for _, props in order})


class SteadyPublisher(threading.Thread):
    """Sends orders (3 events each, one SDK batch, keyed by the order) one after another until stopped
    or ``orders`` are sent, recording when the service acknowledged each event."""

    def __init__(self, endpoint: Any, prefix: str, orders: int, pace: float = 0.3):
        super().__init__(daemon=True)
        self.endpoint, self.prefix, self.orders, self.pace = endpoint, prefix, orders, pace
        self.sent_at: dict[Key, float] = {}  # in the order sent
        self.stop = threading.Event()
        self.error: BaseException | None = None

    @property
    def sent(self) -> int:
        """How many events the service acknowledged so far."""
        return len(self.sent_at)

    def run(self) -> None:
        events = order_events(self.prefix, self.orders)
        try:
            with self.endpoint.producer() as producer:
                for start in range(0, len(events), 3):
                    if self.stop.is_set():
                        return
                    _send_timed(producer, events[start:start + 3], self.sent_at)
                    self.stop.wait(self.pace)  # a steady rate, not a wait for anything
        except BaseException as exc:  # reported by the test
            self.error = exc


class SinkSampler(threading.Thread):
    """Reads the sink table every ``every`` seconds and records when each ``(order_id, step)`` is first in it."""

    def __init__(self, db: Path, every: float = 0.5):
        super().__init__(daemon=True)
        self.db, self.every = db, every
        self.seen: dict[Key, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                counts = sink_counts(self.db, timeout=1)
            except sqlite3.OperationalError:  # busy with a writer: the next read finds it
                counts = Counter()
            now = time.time()
            for key in counts:
                self.seen.setdefault(key, now)
            self.stop.wait(self.every)

    def close(self) -> None:
        """Stop reading (a sampler never started has nothing to stop)."""
        self.stop.set()
        if self.ident is not None:
            self.join(10)


def delivery_times(sent_at: Mapping[Key, float], seen: Mapping[Key, float], keys: Iterable[Key]) -> dict[Key, float]:
    """Seconds from each event's acknowledged send to its first sight in the sink (``inf``: never seen)."""
    return {key: seen.get(key, math.inf) - sent_at[key] for key in keys}


def percentile(values: Iterable[float], share: float) -> float:
    """The nearest-rank percentile (``share`` 0.95: the 95th)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def check_within(what: str, times: Mapping[Key, float], bound: float) -> str:
    """Assert every delivery time of ``times`` is at most ``bound``; the line of figures (printed by the test)."""
    assert times, f"{what}: no events to measure"
    line = (f"{what}: {len(times)} events, max {max(times.values()):.1f} s, p95 {percentile(times.values(), 0.95):.1f} s "
            f"(bound {bound:.0f} s)")
    late = sorted((t, key) for key, t in times.items() if t > bound)
    assert not late, f"{line}; {len(late)} late (inf: never in the sink), the latest: {late[-5:]}"
    return line


def stream_classes(sent_at: Mapping[Key, float], last_batch: float = LAST_BATCH) -> tuple[list[Key], list[Key]]:
    """The events of a steady stream (``sent_at`` as published) split into those of its last batch
    (sent in its last ``last_batch`` seconds: no later event follows them) and the others."""
    end = max(sent_at.values())
    last = [key for key, at in sent_at.items() if at > end - last_batch]
    return [key for key in sent_at if sent_at[key] <= end - last_batch], last


def unconsumed_asset_events(home: Path) -> list[int]:
    """The ids of asset events in ``home``'s SQLite metadata DB that no run consumed (stranded, or not yet queued)."""
    with sqlite3.connect(home / "airflow.db", timeout=10) as conn:
        rows = conn.execute("SELECT id FROM asset_event WHERE id NOT IN (SELECT event_id FROM dagrun_asset_event)").fetchall()
    return [row_id for (row_id,) in rows]
