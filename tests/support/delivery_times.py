"""How long each event takes from the hub to a SQL sink: publishers that record when the service
acknowledged each event, a sampler that records when each first shows in the sink table, and the
check of those delivery times against a bound.

What the event-driven example's tests (``airflow standalone`` on the dev environment's Airflow and
on the floor's, and the deployment test) and the deployment soak share:

- :class:`SteadyPublisher`: orders one after another at a steady pace;
- :class:`Bursts`: a few orders at a time, every so many seconds (a run's worth of events a burst);
- :class:`SinkSampler`: reads the sink table (SQLite) every so often;
- :func:`delivery_times` and :func:`check_within`: each event's delay, and the bound's check;
- :func:`wait_for_receivers`: until a watcher reads every partition of its hub.

Orders are those of :func:`~tests.support.events.order_events` (3 events each, keyed
by the order); an event is known by its ``(order_id, step)``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.support.events import order_events, send_order

Key = tuple[str, int]  # (order_id, step)
SINK_TABLE = "live_order_events"  # the event-driven example's table


def sink_counts(db: Path, *prefixes: str, table: str = SINK_TABLE, timeout: float = 30) -> Counter:
    """How often each ``(order_id, step)`` is in the sink table (of these order prefixes, or all)."""
    with sqlite3.connect(db, timeout=timeout) as conn:
        try:
            rows = conn.execute(f"SELECT order_id, step FROM {table}").fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # the table is created by the first run
                return Counter()
            raise
    return Counter((o, int(s)) for o, s in rows if not prefixes or o.split("-")[0] in prefixes)


def publish_timed(endpoint: Any, prefix: str, orders: int) -> dict[Key, float]:
    """Send the orders' events (one SDK batch an order); when the service acknowledged each (POSIX time)."""
    events, sent_at = order_events(prefix, orders), dict[Key, float]()
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
        except BaseException as exc:  # reported by the caller
            self.error = exc


class Bursts(threading.Thread):
    """``orders`` orders at a time every ``every`` seconds until stopped, recording when the service
    acknowledged each event: a run's worth of events a burst, so that the runs they start share the
    workers with other work instead of crowding it. Burst ``n``'s orders are ``<prefix>b<n>-0000`` on."""

    def __init__(self, endpoint: Any, orders: int = 4, every: float = 20.0, prefix: str | None = None):
        super().__init__(daemon=True)
        self.endpoint, self.orders, self.every = endpoint, orders, every
        self.prefix = prefix or "live" + uuid.uuid4().hex[:8]
        self.sent_at: dict[Key, float] = {}
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        burst = 0
        try:
            while not self.stop.is_set():
                self.sent_at.update(publish_timed(self.endpoint, f"{self.prefix}b{burst}", self.orders))
                burst += 1
                self.stop.wait(self.every)
        except BaseException as exc:  # reported by close()
            self.error = exc

    def close(self) -> dict[Key, float]:
        """Stop sending; when each event was acknowledged. Raises what failed a send."""
        self.stop.set()
        self.join(60)
        if self.error is not None:
            raise RuntimeError(f"publishing the bursts failed: {self.error!r}") from self.error
        return dict(self.sent_at)


class SinkSampler(threading.Thread):
    """Reads the sink table every ``every`` seconds and records when each ``(order_id, step)`` is first in it."""

    def __init__(self, db: Path, every: float = 0.5, table: str = SINK_TABLE):
        super().__init__(daemon=True)
        self.db, self.every, self.table = db, every, table
        self.seen: dict[Key, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                counts = sink_counts(self.db, table=self.table, timeout=1)
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


def summary(what: str, times: Mapping[Key, float], bound: float) -> str:
    """One line of figures: how many events, the largest and the 95th percentile delay, the bound."""
    return (f"{what}: {len(times)} events, max {max(times.values()):.1f} s, p95 {percentile(times.values(), 0.95):.1f} s "
            f"(bound {bound:.0f} s)")


def check_within(what: str, times: Mapping[Key, float], bound: float) -> str:
    """Raise :class:`AssertionError` unless every delivery time of ``times`` is at most ``bound``; the
    line of figures (:func:`summary`)."""
    if not times:
        raise AssertionError(f"{what}: no events to measure")
    line = summary(what, times, bound)
    late = sorted((t, key) for key, t in times.items() if t > bound)
    if late:
        raise AssertionError(f"{line}; {len(late)} late (inf: never in the sink), the latest: {late[-5:]}")
    return line


def wait_for_receivers(admin: Any, hub: str, consumer_group: str, partitions: int, timeout: float = 180,
                       alive: Callable[[], None] | None = None) -> None:
    """Wait until ``consumer_group`` has a receiver open on each of the hub's ``partitions`` (a watcher
    started), as the local endpoint's admin API (``admin``) shows; ``alive`` raises when what should
    open them is gone."""
    wanted = {str(p) for p in range(partitions)}
    deadline = time.monotonic() + timeout
    while {r["partition"] for r in admin.receivers(hub) if r["consumer_group"].lower() == consumer_group.lower()} != wanted:
        if alive is not None:
            alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{consumer_group} did not open all {partitions} partitions of {hub} in {timeout} s")
        time.sleep(1)
