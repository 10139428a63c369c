"""Which task instances the Event Hubs tab describes, told by their template fields (subclasses included)."""

from __future__ import annotations

from airflow_provider_eh.operators.ingest import EventHubIngestOperator
from airflow_provider_eh.operators.ingest_events import EventHubIngestEventsOperator
from airflow_provider_eh.operators.publish import EventHubPublishOperator
from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator
from airflow_provider_eh.plugins.tabs import as_list, serialized_task, task_kind
from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor


def test_each_operator_of_the_package_is_told_by_its_template_fields() -> None:
    class Audited(EventHubPublishOperator):
        template_fields = (*EventHubPublishOperator.template_fields, "extra")

    assert task_kind(EventHubPublishOperator.template_fields) == "publish"
    assert task_kind(SparkToEventHubOperator.template_fields) == "publish"
    assert task_kind(Audited.template_fields) == "publish"
    assert task_kind(EventHubCheckpointSensor.template_fields) == "checkpoint_sensor"
    # a sensor serialized by an earlier release, whose field was still called container
    old = [f if f != "checkpoint_container" else "container" for f in EventHubCheckpointSensor.template_fields]
    assert task_kind(old) == "checkpoint_sensor"
    assert task_kind(EventHubIngestOperator.template_fields) == "ingest"
    assert task_kind(EventHubIngestEventsOperator.template_fields) == "ingest"
    assert task_kind(("bash_command", "env")) is None
    assert task_kind(None) is None


def test_a_mapped_tasks_arguments_are_merged_in() -> None:
    data = {"dag": {"tasks": [
        {"__var": {"task_id": "other", "template_fields": []}},
        {"__var": {"task_id": "publish", "template_fields": ["producer_group"], "partial_kwargs": {"producer_group": "g"}}},
    ]}}
    assert serialized_task(data, "publish")["producer_group"] == "g"
    assert serialized_task(data, "missing") is None


def test_consumer_groups_as_a_dag_or_a_rendered_template_give_them() -> None:
    assert as_list("$Default") == ["$Default"]
    assert as_list(["a", "b"]) == ["a", "b"]
    assert as_list("['a', 'b']") == ["a", "b"]
    assert as_list("") == [] and as_list(None) == []
