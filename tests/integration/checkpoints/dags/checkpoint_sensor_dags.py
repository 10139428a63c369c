"""DAGs run with ``dag.test()`` by the checkpoint sensor tests (a DAG bundle of their own).

The container and the targets come from the run's conf through templated fields, the way a
pipeline passes the publish task's output.
"""

from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor

_COMMON = {
    "task_id": "wait_for_checkpoints",
    "checkpoint_container": "{{ params.container }}",
    "consumer_groups": "analytics",
    "targets": "{{ params.targets | tojson }}",
    "poke_interval": 0.5,
}


def _dag(dag_id: str, **sensor_kwargs: object) -> DAG:
    with DAG(
        dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        params={"container": "", "targets": {}},
    ) as dag:
        EventHubCheckpointSensor(**{**_COMMON, **sensor_kwargs})  # type: ignore[arg-type]
    return dag


checkpoint_deferrable = _dag("checkpoint_deferrable", deferrable=True, timeout=90)
checkpoint_deferrable_timeout = _dag("checkpoint_deferrable_timeout", deferrable=True, timeout=4)
checkpoint_reschedule = _dag("checkpoint_reschedule", deferrable=False, mode="reschedule", timeout=90)
