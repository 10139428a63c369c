"""Start a run when new events arrive in the ``orders`` hub, and load exactly what they name.

The asset's watcher (:class:`EventHubEventTrigger`, in the triggerer) reads the hub as the consumer
group ``airflow-watcher`` and fires one asset event per batch of up to 50 events or 5 seconds,
checkpointing a batch once its asset event is stored. Each run loads each partition from the
loader's SQL checkpoint up to the last event its asset events name; a run started by hand loads up
to the hub's end. The hub needs the consumer group ``airflow-watcher``.
"""

from __future__ import annotations

import pendulum

from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import Asset, AssetWatcher, dag

from airflow_provider_eh.operators.ingest import Batching, BlobCheckpoints, SqlSink
from airflow_provider_eh.operators.ingest_events import EventHubIngestEventsOperator
from airflow_provider_eh.triggers.event import EventHubEventTrigger

# --8<-- [start:asset]
new_orders = Asset(
    name="new_orders_hub",
    uri="eventhubs://mynamespace.servicebus.windows.net/orders",
    watchers=[
        AssetWatcher(
            name="new_orders",
            trigger=EventHubEventTrigger(
                eventhub_name="orders",
                consumer_group="airflow-watcher",       # a group of its own, created on the hub
                checkpoint_container="eh-checkpoints",  # the standard BlobCheckpointStore layout
                batch_size=50,                          # one asset event per up to 50 events ...
                batch_seconds=5.0,                      # ... or 5 s after a batch's first event
            ),
        )
    ],
)
# --8<-- [end:asset]


@dag(
    schedule=[new_orders],
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["event-hubs", "example", "event-driven"],
)
def example_load_new_orders() -> None:
    """Load the orders that started the run, exactly once."""
    create_table = SQLExecuteQueryOperator(
        task_id="create_table",
        conn_id="orders_db",
        sql="CREATE TABLE IF NOT EXISTS new_orders (order_id TEXT NOT NULL, amount INTEGER NOT NULL)",
    )

    # --8<-- [start:load]
    load = EventHubIngestEventsOperator(
        task_id="load_new_orders",
        eventhub_name="orders",
        consumer_group="$Default",              # the loader's own group, not the watcher's
        sink=SqlSink("new_orders", conn_id="orders_db"),
        columns=["order_id", "amount"],
        checkpoints=BlobCheckpoints("eh-checkpoints"),
        batching=Batching(max_wait_time=0.5),
    )
    # --8<-- [end:load]

    create_table >> load


example_load_new_orders()
