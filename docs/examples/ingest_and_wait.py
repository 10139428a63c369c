"""Publish a day's payments, load the hub into SQL exactly once, and wait until the consumer has checkpointed.

``load_payments`` reads the hub as the ``analytics`` consumer group into the table ``payments`` of
the SQL connection ``orders_db``, one transaction per batch with its checkpoint, and mirrors its
checkpoints to the standard blob layout in ``eh-checkpoints``; ``wait_for_analytics`` waits until
that group's checkpoints reach what ``publish_payments`` published. The hub needs the consumer
group ``analytics``.
"""

from __future__ import annotations

from typing import Any

import pendulum

from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import dag

from airflow_provider_eh.operators.ingest import Batching, BlobCheckpoints, EventHubIngestOperator, SqlSink
from airflow_provider_eh.operators.publish import EventHubPublishOperator, ProducerState
from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor


def payments_of_the_day(context: Any) -> list[dict[str, Any]]:
    """The interval's 50 payments: the same interval always gives the same events."""
    day = context["data_interval_start"].strftime("%Y%m%d")
    return [{"body": {"order_id": f"{day}-p{n:03d}", "amount": n}, "partition_key": f"customer-{n % 5}"}
            for n in range(50)]


@dag(
    schedule="@daily",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["event-hubs", "example"],
)
def example_ingest_and_wait() -> None:
    """Publish the day's payments, load them into SQL and wait for the consumer's checkpoints."""
    publish = EventHubPublishOperator(
        task_id="publish_payments",
        eventhub_name="orders",
        events=payments_of_the_day,
        state=ProducerState("blob", container="eh-producer-state"),  # leases fence overlapping runs
    )

    create_table = SQLExecuteQueryOperator(
        task_id="create_table",
        conn_id="orders_db",
        sql="CREATE TABLE IF NOT EXISTS payments (order_id TEXT NOT NULL, amount INTEGER NOT NULL)",
    )

    # --8<-- [start:ingest]
    load = EventHubIngestOperator(
        task_id="load_payments",
        eventhub_name="orders",
        consumer_group="analytics",
        sink=SqlSink("payments", conn_id="orders_db"),  # it must exist; a sqlite, postgres or mysql connection
        columns=["order_id", "amount"],  # the default row function: the JSON body's keys, one row per event
        checkpoints=BlobCheckpoints("eh-checkpoints"),  # also the standard checkpoint blobs (sensors see them)
        batching=Batching(max_wait_time=0.5),
    )
    # --8<-- [end:ingest]

    # --8<-- [start:sensor]
    wait = EventHubCheckpointSensor(
        task_id="wait_for_analytics",
        eventhub_name="orders",
        checkpoint_container="eh-checkpoints",          # where the consumers' BlobCheckpointStore writes
        consumer_groups=["analytics"],
        targets=publish.output,              # or {"0": 1234, ...}; None = everything enqueued so far
        deferrable=True,
        poke_interval=5,
        timeout=600,
    )
    # --8<-- [end:sensor]

    [publish, create_table] >> load >> wait


example_ingest_and_wait()
