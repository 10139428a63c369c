"""Quickstart: check the Event Hubs connection and show the hub's partitions.

The smallest DAG of the provider: it reads the hub behind ``azure_event_hubs_default`` and reports
each partition's last enqueued sequence number. Trigger it from the UI with another hub in
``params.hub``.
"""

from __future__ import annotations

import pendulum

from airflow.sdk import Param, dag, task


@dag(
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["event-hubs", "example"],
    params={"hub": Param("orders", type="string", minLength=1, maxLength=256, description="Event Hub to inspect")},
)
def eh_quickstart():
    """Check the Event Hubs connection and show each partition of ``params.hub``."""
    @task
    def inspect_hub(params: dict | None = None) -> dict[str, int]:
        from airflow_provider_eh.hooks.event_hubs import EventHubHook

        hook = EventHubHook(eventhub_name=params["hub"])
        report = {}
        for partition in hook.get_partition_ids():
            props = hook.get_partition_properties(partition)
            report[partition] = props["last_enqueued_sequence_number"]
            print(f"partition {partition}: last enqueued sequence number {report[partition]}")
        return report

    inspect_hub()


eh_quickstart()
