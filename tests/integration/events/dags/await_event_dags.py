"""DAGs run with ``dag.test()`` by the await-event sensor tests (a DAG bundle of their own)."""

from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.sensors.await_event import EventHubAwaitEventSensor

_COMMON = {
    "task_id": "wait_for_paid_order",
    "eventhub_name": "{{ params.hub }}",
    "consumer_group": "analytics",
    "filter": "tests.integration.events.event_filters.paid_order",
    "checkpoint_container": "{{ params.container }}",
    "poke_interval": 1.0,
}


def _dag(dag_id: str, **sensor_kwargs: object) -> DAG:
    with DAG(
        dag_id, schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), params={"hub": "", "container": ""},
    ) as dag:
        EventHubAwaitEventSensor(**{**_COMMON, **sensor_kwargs})  # type: ignore[arg-type]
    return dag


await_deferrable = _dag("await_deferrable", deferrable=True, checkpoint=True, timeout=60)
await_deferrable_timeout = _dag("await_deferrable_timeout", deferrable=True, start_at="earliest", timeout=10)
await_poke = _dag("await_poke", deferrable=False, mode="poke", start_at="earliest", timeout=60)
