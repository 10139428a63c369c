"""Arguments that accept an upstream task's output are templated fields: Airflow draws the edge when the
DAG is defined and resolves the value when the task runs, as for its own operators."""

from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import DAG, task

from airflow_provider_eh.operators.publish import EventHubPublishOperator
from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator
from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


@task
def upstream() -> list:
    return []


def test_events_from_an_upstream_output_make_that_task_upstream_of_publish() -> None:
    with DAG("edges_publish", schedule=None, start_date=START):
        events = upstream.override(task_id="build_events")()
        publish = EventHubPublishOperator(task_id="publish", events=events)
    assert publish.upstream_task_ids == {"build_events"}


def test_sensor_targets_from_the_publish_output_make_publish_upstream_of_the_sensor() -> None:
    with DAG("edges_sensor", schedule=None, start_date=START):
        publish = EventHubPublishOperator(task_id="publish", events=[])
        wait = EventHubCheckpointSensor(task_id="wait", checkpoint_container="checkpoints", targets=publish.output)
    assert wait.upstream_task_ids == {"publish"}


def test_spark_path_and_table_from_upstream_outputs_make_those_tasks_upstream() -> None:
    with DAG("edges_spark", schedule=None, start_date=START):
        by_path = SparkToEventHubOperator(task_id="by_path", path=upstream.override(task_id="write_files")())
        by_table = SparkToEventHubOperator(task_id="by_table", table=upstream.override(task_id="write_table")())
    assert (by_path.upstream_task_ids, by_table.upstream_task_ids) == ({"write_files"}, {"write_table"})


def test_rendering_calls_an_events_function_with_the_context_and_renders_literal_strings_only() -> None:
    """Airflow calls a callable templated field as ``f(context=, jinja_env=)``; ours take the context alone."""

    def todays(context: dict) -> list:
        return [{"body": f"orders of {context['ds']}", "properties": {"raw": "{{ ds }}"}}]

    with DAG("render_events", schedule=None, start_date=START):
        from_function = EventHubPublishOperator(task_id="from_function", events=todays)
        literal = EventHubPublishOperator(task_id="literal", events=[{"body": "orders of {{ ds }}"}, b"{{ ds }}"])
    context = {"ds": "2026-03-01"}
    from_function.render_template_fields(context)  # type: ignore[arg-type]
    literal.render_template_fields(context)  # type: ignore[arg-type]
    assert from_function.events == [{"body": "orders of 2026-03-01", "properties": {"raw": "{{ ds }}"}}]
    assert literal.events == [{"body": "orders of 2026-03-01"}, b"{{ ds }}"]
