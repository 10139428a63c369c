"""Wait in a DAG for one event of the ``orders`` hub, and use it downstream.

``EventHubAwaitEventSensor`` defers to the triggerer, reads the hub as its consumer group and
returns the first event that ``filter`` keeps (without a filter: the first event), through XCom.
"""

from __future__ import annotations

from typing import Any

import pendulum

from airflow.sdk import dag, task

from airflow_provider_eh.sensors.await_event import EventHubAwaitEventSensor


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["event-hubs", "example"],
)
def example_await_event() -> None:
    """Wait for an order event, then use it downstream."""
    # --8<-- [start:sensor]
    wait = EventHubAwaitEventSensor(
        task_id="wait_for_an_order",
        eventhub_name="orders",
        consumer_group="$Default",
        start_at="earliest",     # for partitions without a checkpoint; the default "latest" waits for new events
        # filter="my_pkg.filters.is_big_order",  # a dotted path, called with each event record
        timeout=600,
    )
    # --8<-- [end:sensor]

    @task
    def show(event: dict[str, Any]) -> str:
        """The event record: partition, sequence number, offset, enqueued time, properties and body."""
        print(f"partition {event['partition']} sequence number {event['sequence_number']}: {event['body']!r}")
        return event["partition"]

    show(wait.output)


example_await_event()
