"""The same watcher through the common messaging provider: ``MessageQueueTrigger`` with the ``eventhubs`` scheme.

Needs the ``messaging`` extra (``apache-airflow-providers-common-messaging``). The trigger it selects
is :class:`~airflow_provider_eh.triggers.event.EventHubEventTrigger`, with the same arguments.
"""

from __future__ import annotations

from typing import Any

import pendulum

from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger
from airflow.sdk import Asset, AssetWatcher, dag, task

orders_queue = Asset(
    name="orders_queue",
    uri="eventhubs://mynamespace.servicebus.windows.net/orders",
    watchers=[
        AssetWatcher(
            name="orders_queue_watcher",
            trigger=MessageQueueTrigger(
                scheme="eventhubs",
                eventhub_name="orders",
                consumer_group="airflow-watcher",
                checkpoint_container="eh-checkpoints",
            ),
        )
    ],
)


@dag(
    schedule=[orders_queue],
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["event-hubs", "example", "event-driven"],
)
def example_queue_triggered() -> None:
    """Show the sequence-number ranges of the events that started the run."""
    @task
    def show_ranges(triggering_asset_events: Any = None) -> dict[str, Any]:
        """The sequence-number ranges the run's asset events name, per partition."""
        from airflow_provider_eh.triggers.payload import ranges_of

        payloads = [event.extra["payload"] for events in (triggering_asset_events or {}).values() for event in events
                    if "payload" in (event.extra or {})]
        ranges = ranges_of(payloads)
        print(f"{len(payloads)} asset events, ranges {ranges}")
        return ranges

    show_ranges()


example_queue_triggered()
