"""Publish each day's orders to the ``orders`` hub, every event exactly once.

A retry, a clear-and-rerun or a backfill of a day builds the same events (they depend on the data
interval only) and the operator finds that day's batch in its ledger: nothing is sent twice.
"""

from __future__ import annotations

from typing import Any

import pendulum

from airflow.sdk import dag, task

from airflow_provider_eh.operators.publish import EventHubPublishOperator, ProducerState


@dag(
    schedule="@daily",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["event-hubs", "example"],
)
def example_publish_events() -> None:
    """Publish the day's orders exactly once."""
    @task
    def build_events(data_interval_start: Any = None) -> list[dict[str, Any]]:
        """The day's 100 orders, derived from the interval alone."""
        day = data_interval_start.strftime("%Y%m%d")
        return [
            {
                "body": {"order_id": f"{day}-{n:05d}", "amount": 10 * n},
                "properties": {"order_id": f"{day}-{n:05d}"},
                "partition_key": f"customer-{n % 7}",  # one customer's orders stay in order on one partition
            }
            for n in range(100)
        ]

    # --8<-- [start:operator]
    EventHubPublishOperator(
        task_id="publish_orders",
        eventhub_name="orders",
        events=build_events(),                # a list, a callable(context) or an upstream task's output
        state=ProducerState("blob", container="eh-producer-state"),  # or ProducerState("variable")
    )
    # --8<-- [end:operator]


example_publish_events()
