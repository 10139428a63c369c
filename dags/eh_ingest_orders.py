"""Warehouse ingestion: load the orders hub into SQLite and into a Delta table, each exactly once.

Scheduled on the hub's asset: every successful ``publish_orders`` of ``eh_daily_orders`` queues a run.
``load_orders`` (:class:`EventHubIngestOperator`) reads what the ``$Default`` consumer group has not
yet loaded, up to the hub's end when the run starts, and writes each batch in one SQLite transaction
(``eh_example_db``, table ``order_events``) together with its checkpoint, so a retry or a re-run
loads nothing twice. Each order is a session: its events (``step`` 0, 1, 2) are applied in order,
an early one waits in the ``deferred`` table for its predecessors, and the event flagged ``final``
closes the order. Events the row function refuses (an unknown currency) become dead letters with
the reason; once their cause is fixed, trigger a run with ``replay_dead_letters`` to apply them again.

``load_lakehouse`` loads the same hub as the ``lakehouse`` consumer group into a Delta table on local disk
(``<data dir>/lakehouse/order_events``, ``sink="delta"``): each batch one Delta commit holding its rows
and the partition's checkpoint, the refused events in ``order_events_dead_letters`` beside it, replayed
with the warehouse's when asked. A Delta table keeps no sessions: its rows are in partition order.
"""

from __future__ import annotations

from typing import Any

import pendulum

from airflow.providers.common.compat.sdk import AirflowSkipException
from airflow.sdk import Param, dag, task

import _orders as orders
from airflow_provider_eh.operators.ingest import (
    Batching,
    BlobCheckpoints,
    DeltaSink,
    EventHubDeadLetterReplayOperator,
    EventHubIngestOperator,
    IngestLimits,
    Sessions,
    SqlSink,
)


def skip_unless_replay_requested(context: Any) -> None:
    """Run the replay only when the run's ``replay_dead_letters`` param asks for it."""
    if not context["params"]["replay_dead_letters"]:
        raise AirflowSkipException("replay_dead_letters is off; trigger with it on to apply the dead letters again")


@dag(
    schedule=[orders.ORDERS_HUB],
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=30)},
    tags=["event-hubs", "example"],
    doc_md=__doc__,
    params={
        "hub": Param(
            orders.HUB, type="string", pattern=orders.HUB_NAME_PATTERN, title="Event Hub",
            description="The hub to load from.",
        ),
        "replay_dead_letters": Param(
            False, type="boolean", title="Replay dead letters",
            description="Apply this hub's dead letters again after loading (once their cause is fixed).",
        ),
    },
)
def eh_ingest_orders() -> None:
    """Load the orders hub into the warehouse table; replay dead letters when asked."""
    # the table, the row function and the stream (hub, consumer group) the dead letters belong to
    sink: dict[str, Any] = {
        "sink": SqlSink(orders.WAREHOUSE_TABLE, conn_id=orders.SQL_CONN_ID),
        "row_function": orders.warehouse_row,
        "eventhub_name": "{{ params.hub }}",
        "consumer_group": "$Default",
    }
    load = EventHubIngestOperator(
        task_id="load_orders",
        **sink,
        checkpoints=BlobCheckpoints(orders.CHECKPOINT_CONTAINER),
        sessions=Sessions("property:order_id", sequence="property:step", end="property:final"),
        batching=Batching(max_wait_time=0.5),
        limits=IngestLimits(max_duration=600),
        inlets=[orders.ORDERS_HUB],
    )

    replay = EventHubDeadLetterReplayOperator(
        task_id="replay_dead_letters",
        **sink,
        fail_on_error=False,
        pre_execute=skip_unless_replay_requested,
    )

    # the same orders into a Delta table, as another consumer group: each loads everything once
    lakehouse: dict[str, Any] = {
        # a local path, or abfss://container@account.dfs.core.windows.net/...
        "sink": DeltaSink(orders.LAKEHOUSE_TABLE),
        "row_function": orders.warehouse_row,
        "eventhub_name": "{{ params.hub }}",
        "consumer_group": orders.LAKEHOUSE_GROUP,
    }
    load_lakehouse = EventHubIngestOperator(
        task_id="load_lakehouse", **lakehouse, batching=Batching(max_wait_time=0.5), limits=IngestLimits(max_duration=600),
        inlets=[orders.ORDERS_HUB],
    )
    replay_lakehouse = EventHubDeadLetterReplayOperator(
        task_id="replay_lakehouse_dead_letters", **lakehouse, fail_on_error=False,
        pre_execute=skip_unless_replay_requested,
    )

    @task(trigger_rule="none_failed")
    def report(loaded: dict[str, Any], params: dict | None = None) -> dict[str, Any]:
        """Log and return what the run loaded and what waits as dead letters."""
        from airflow.sdk import BaseHook

        hook = BaseHook.get_connection(orders.SQL_CONN_ID).get_hook()
        rows = hook.get_first(f"SELECT COUNT(*) FROM {orders.WAREHOUSE_TABLE}")[0]
        dead = dict(hook.get_records(
            "SELECT status, COUNT(*) FROM eh_ingest_dead_letter WHERE eventhub = ? AND consumer_group = '$Default' "
            "GROUP BY status", parameters=(params["hub"],),
        ))
        parts = loaded["partitions"].values()
        summary = {
            "hub": params["hub"],
            "events_read": loaded["events"],
            "rows_written": sum(p.get("rows", 0) for p in parts),
            "duplicates_skipped": sum(p.get("duplicates", 0) for p in parts),
            "new_dead_letters": sum(p.get("dead_letters", 0) for p in parts),
            "table_rows": rows,
            "dead_letters": dead,
        }
        print(
            "hub {hub}: read {events_read} events, wrote {rows_written} rows, skipped {duplicates_skipped} "
            "duplicates, {new_dead_letters} new dead letters; {table_rows} rows in the table, dead letters by "
            "status {dead_letters}".format(**summary)
        )
        return summary

    tables = task(orders.create_tables)()
    tables >> load >> replay
    [load, replay] >> report(load.output)
    load_lakehouse >> replay_lakehouse


eh_ingest_orders()
