"""Event-driven loading: each batch of new order events in the live orders hub starts a run that loads them.

The asset ``new_orders_hub`` has an ``AssetWatcher``: :class:`EventHubEventTrigger` reads the hub as the
``airflow-watcher`` consumer group from its checkpoints (the standard blob layout in
``eh-example-checkpoints``) and fires one asset event per batch (up to 50 events, or 5 s after a
batch's first event), checkpointing a batch once its asset event is stored. Each asset event queues a
run; ``load_new_orders`` (:class:`EventHubIngestEventsOperator`) loads each partition from the
``$Default`` group's SQL checkpoint up to the last sequence number the run's asset events of this hub
name, with the ingest operator's exactly-once guarantees (one transaction per batch with its
checkpoint and dedupe marks), into ``live_order_events`` of ``eh_example_db``. A batch fired twice
after a triggerer restart loads nothing the second time.

Airflow can strand an asset event: stored, but consumed by no run (scheduler races fixed in
apache/airflow pull requests 62501 and 70972; issue 56050, still open, with ``max_active_runs``). The
DAG makes that harmless instead of trusting every asset event to start a run: each run loads from the
SQL checkpoint, so any later run also loads what a stranded event named; a safety run on a schedule
(``EH_EXAMPLE_SAFETY_SCHEDULE``, a cron expression, default every 15 minutes) has no asset events and
loads up to the hub's end, so the last events of the day wait at most that long; and runs may overlap
(no ``max_active_runs=1``): concurrent loads share the partitions through the ownership blobs and the
checkpoint's compare-and-set, one run after the other per partition.

``EH_EXAMPLE_EVENTS_HUB`` names the hub (default ``orders-live``); it needs the consumer group
``airflow-watcher``. The triggerer must be running (``airflow standalone`` starts one).
"""

from __future__ import annotations

import os
from typing import Any

import pendulum

from airflow.sdk import Asset, AssetWatcher, dag, task

try:
    from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable
except ImportError:  # Airflow 3.1: not in the Task SDK yet
    from airflow.timetables.assets import AssetOrTimeSchedule
    from airflow.timetables.trigger import CronTriggerTimetable

import _orders as orders
from airflow_provider_eh.lineage import eventhub_uri
from airflow_provider_eh.operators.ingest import Batching, BlobCheckpoints, IngestLimits, Sessions, SqlSink
from airflow_provider_eh.operators.ingest_events import EventHubIngestEventsOperator
from airflow_provider_eh.triggers.event import EventHubEventTrigger

HUB = os.environ.get("EH_EXAMPLE_EVENTS_HUB", "orders-live")
WATCHER_GROUP = "airflow-watcher"
# The safety run: loads up to the hub's end whatever no asset-triggered run loaded (a stranded asset event)
SAFETY_SCHEDULE = os.environ.get("EH_EXAMPLE_SAFETY_SCHEDULE", "*/15 * * * *")
TABLE = "live_order_events"  # the warehouse table's columns; a table of its own, so the daily example's counts stay put


def create_table() -> None:
    """Create ``live_order_events`` in ``eh_example_db`` when missing."""
    from airflow.sdk import BaseHook

    ddl = orders.TABLES_DDL[-1].replace(f"EXISTS {orders.WAREHOUSE_TABLE} (", f"EXISTS {TABLE} (")
    BaseHook.get_connection(orders.SQL_CONN_ID).get_hook().run(ddl)

NEW_ORDERS = Asset(
    name="new_orders_hub",
    uri=eventhub_uri(orders.EVENT_HUBS_NAMESPACE, HUB),
    group="event-hubs",
    watchers=[
        AssetWatcher(
            name="eh_new_orders",
            trigger=EventHubEventTrigger(
                eventhub_name=HUB,
                consumer_group=WATCHER_GROUP,
                checkpoint_container=orders.CHECKPOINT_CONTAINER,
                batch_size=50,
                batch_seconds=5.0,
            ),
        )
    ],
)


@dag(
    schedule=AssetOrTimeSchedule(timetable=CronTriggerTimetable(SAFETY_SCHEDULE, timezone="UTC"), assets=[NEW_ORDERS]),
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=10)},
    tags=["event-hubs", "example", "event-driven"],
    doc_md=__doc__,
)
def eh_on_new_orders() -> None:
    """Load the events that the run's asset events name, then report what was loaded."""
    load = EventHubIngestEventsOperator(
        task_id="load_new_orders",
        sink=SqlSink(TABLE, conn_id=orders.SQL_CONN_ID),
        row_function=orders.warehouse_row,
        eventhub_name=HUB,
        consumer_group="$Default",
        checkpoints=BlobCheckpoints(orders.CHECKPOINT_CONTAINER),
        sessions=Sessions("property:order_id", sequence="property:step", end="property:final"),
        batching=Batching(max_wait_time=0.5),
        limits=IngestLimits(max_duration=300),
        inlets=[NEW_ORDERS],
    )

    @task
    def report(loaded: dict[str, Any]) -> dict[str, Any]:
        """Log and return what the run loaded: the asset events' ranges and the rows written."""
        parts = loaded["partitions"].values()
        summary = {
            "hub": HUB,
            "ranges": loaded["ranges"],
            "events_read": loaded["events"],
            "rows_written": sum(p.get("rows", 0) for p in parts),
            "duplicates_skipped": sum(p.get("duplicates", 0) for p in parts),
            "dead_letters": sum(p.get("dead_letters", 0) for p in parts),
        }
        print("hub {hub}: ranges {ranges}: read {events_read} events, wrote {rows_written} rows, skipped "
              "{duplicates_skipped} duplicates, {dead_letters} dead letters".format(**summary))
        return summary

    task(create_table)() >> load
    report(load.output)


eh_on_new_orders()
