"""How long each event of the event-driven example (``eh_on_new_orders``) takes to reach its sink.

What its ``airflow standalone`` tests share (on the dev environment's Airflow and on the floor's):
the hub and the settings the example runs with, and the bound; the publishers, the sampler of
``live_order_events`` and the check of delivery times against a bound are
:mod:`tests.support.delivery_times`'s (imported here for them).

The bound: an event of a steady stream is in a batch the watcher fires within its batch window; the
scheduler queues the asset event's run within ``RUN_SLACK``; the run's two tasks (each a process that
Airflow starts) create the table and load the event within ``LOAD_TIME``. That makes
``DELIVERY_BOUND``, 60 s, room enough on a loaded 2-core machine. A stranded asset event (an Airflow
scheduler race) costs its events one batch window more, until the next batch's run loads them from
the SQL checkpoint; only the stream's last batch, which no later event follows, waits for the safety
run: ``SAFETY_EVERY + DELIVERY_BOUND``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.conftest import unique_name
from tests.support.delivery_times import (  # noqa: F401 (what the tests import from here)
    SINK_TABLE,
    Key,
    SinkSampler,
    SteadyPublisher,
    check_within,
    delivery_times,
    percentile,
    publish_timed,
    sink_counts,
    wait_for_receivers,
)
from tests.support.events import event_dags_folder

DAG_ID = "eh_on_new_orders"
WATCHER_GROUP = "airflow-watcher"
BATCH_WINDOW = 5.0  # the example DAG's watcher
RUN_SLACK = 15.0  # from the asset event to its run queued (the scheduler's loop, heartbeat 2 s here)
LOAD_TIME = 40.0  # from the run queued to the event written: two task processes, the table, the load
DELIVERY_BOUND = BATCH_WINDOW + RUN_SLACK + LOAD_TIME
SAFETY_EVERY = 60.0  # EH_EXAMPLE_SAFETY_SCHEDULE below
# The stream's last batch: the events sent in its last two batch windows (a batch fires at most one
# window after its first event)
LAST_BATCH = 2 * BATCH_WINDOW


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
    try:
        wait_for_receivers(event_hubs.admin, hub, WATCHER_GROUP, 2, timeout, alive=airflow.check_alive)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{airflow.tail()}") from None


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
