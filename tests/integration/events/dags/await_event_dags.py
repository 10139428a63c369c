"""DAGs run with ``dag.test()`` by the await-event sensor tests (a DAG bundle of their own)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

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
await_poke = _dag("await_poke", deferrable=False, mode="poke", start_at="latest", timeout=60)
await_poke_timeout = _dag("await_poke_timeout", deferrable=False, mode="poke", start_at="earliest", timeout=14)
await_reschedule = _dag(
    "await_reschedule", deferrable=False, mode="reschedule", start_at="latest", timeout=60, poke_interval=4.0,
    filter="tests.integration.events.event_filters.paid_order_at",
)
# A consumer group the hub does not have: a config error, so no retry although one is allowed
_UNKNOWN_GROUP = {"consumer_group": "no-such-group", "retries": 1, "retry_delay": timedelta(seconds=1), "timeout": 60}
await_unknown_group_poke = _dag("await_unknown_group_poke", deferrable=False, mode="poke", **_UNKNOWN_GROUP)
await_unknown_group_deferrable = _dag("await_unknown_group_deferrable", deferrable=True, **_UNKNOWN_GROUP)
