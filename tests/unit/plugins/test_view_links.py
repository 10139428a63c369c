"""Batch -> task instance links: which tasks publish, with which group and generation, and for whom."""

from __future__ import annotations

import inspect
from datetime import datetime, timezone

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from airflow.sdk import DAG

try:  # the DAG serializer's name from Airflow 3.2 (SerializedDAG before)
    from airflow.serialization.serialized_objects import DagSerialization
except ImportError:
    from airflow.serialization.serialized_objects import SerializedDAG as DagSerialization  # type: ignore[no-redef]

from airflow_provider_eh.operators.publish import EventHubPublishOperator
from airflow_provider_eh.plugins import links
from airflow_provider_eh.publishing.batch_id import derive_batch_id

START, END = datetime(2026, 3, 1, tzinfo=timezone.utc), datetime(2026, 3, 2, tzinfo=timezone.utc)


class AuditedPublishOperator(EventHubPublishOperator):
    """A team's own subclass: another class name, the same publishing."""


def _serialized() -> dict:
    with DAG("orders", schedule=None) as dag:
        AuditedPublishOperator(task_id="audited", events=[], generation=2, state_container="s")
        EventHubPublishOperator(task_id="templated", events=[], generation="{{ params.generation }}",
                                producer_group="orders-{{ params.region }}")
        EventHubPublishOperator(task_id="plain", events=[])
        EventHubPublishOperator.partial(task_id="mapped", producer_group="mapped-group", generation=1).expand(events=[[1], [2]])
    return DagSerialization.to_dict(dag)


def _run(task_id: str, run_id: str = "scheduled__2026-03-01", map_index: int = -1) -> links.PublishRun:
    return links.PublishRun("orders", task_id, run_id, map_index, START, END, START)


def test_publishing_tasks_are_found_by_their_template_fields_whatever_their_class_and_keep_their_declared_values() -> None:
    tasks = links.publish_tasks(_serialized())
    assert tasks == {
        "audited": links.PublishFields(None, 2),
        "templated": links.PublishFields("orders-{{ params.region }}", "{{ params.generation }}"),
        "plain": links.PublishFields(None, 0),
        "mapped": links.PublishFields("mapped-group", 1),
    }


def test_a_batch_published_with_generation_above_zero_links_to_its_task_instance() -> None:
    fields = links.publish_tasks(_serialized())
    batch = derive_batch_id("orders.audited", "orders", "audited", interval_start=START, interval_end=END,
                            logical_date=START, run_id="scheduled__2026-03-01", generation=2)
    found = links.match_batches([(_run("plain"), fields["plain"], None), (_run("audited"), fields["audited"], None)],
                                {batch: "orders.audited"})
    assert found == {batch: {
        "dag_id": "orders", "task_id": "audited", "run_id": "scheduled__2026-03-01", "map_index": -1,
        "interval_start": START.isoformat(), "interval_end": END.isoformat(), "logical_date": START.isoformat(),
    }}


def test_templated_group_and_generation_are_taken_as_airflow_rendered_them() -> None:
    fields = links.publish_tasks(_serialized())["templated"]
    batch = derive_batch_id("orders-eu", "orders", "templated", interval_start=START, interval_end=END, generation=3)
    rendered = {"producer_group": "orders-eu", "generation": "3"}
    assert set(links.match_batches([(_run("templated"), fields, rendered)], {batch: "orders-eu"})) == {batch}
    assert links.match_batches([(_run("templated"), fields, None)], {batch: "orders-eu"}) == {}  # rendering pruned


def test_groups_no_task_declares_are_tried_and_mapped_instances_keep_their_index() -> None:
    fields = links.publish_tasks(_serialized())
    per_partition = derive_batch_id("eu-partitions", "orders", "plain", interval_start=START, interval_end=END)
    mapped = derive_batch_id("mapped-group", "orders", "mapped", interval_start=START, interval_end=END, map_index=1, generation=1)
    runs = [(_run("plain"), fields["plain"], None), (_run("mapped", map_index=1), fields["mapped"], None)]
    found = links.match_batches(runs, {per_partition: "eu-partitions", mapped: "mapped-group"}, {"eu-partitions"})
    assert found[per_partition]["task_id"] == "plain"
    assert (found[mapped]["task_id"], found[mapped]["map_index"]) == ("mapped", 1)


def test_reading_runs_stops_once_every_batch_is_found() -> None:
    fields = links.PublishFields(None, 0)
    batch = _run("plain").batch_id("orders.plain", 0)
    read: list[str] = []

    def runs():
        for run_id in ("newest", "scheduled__2026-03-01", "older", "oldest"):
            read.append(run_id)
            yield links.PublishRun("orders", "plain", run_id, -1, START, END, START), fields, None

    assert links.match_batches(runs(), {batch: "orders.plain"})[batch]["run_id"] == "newest"
    assert read == ["newest"]  # the interval, not the run id, makes the id: the newest run of it wins


SIMPLE_USERS_HAVE_TEAMS = "teams" in inspect.signature(SimpleAuthManagerUser).parameters


def test_links_are_given_only_for_dags_whose_task_instances_the_auth_manager_lets_the_user_read() -> None:
    manager = SimpleAuthManager()
    no_teams = {"orders": None, "payroll": None}
    assert links.readable_dags(manager, SimpleAuthManagerUser(username="bo", role="viewer"), no_teams) == set(no_teams)
    assert links.readable_dags(manager, SimpleAuthManagerUser(username="cy", role="admin"), no_teams) == set(no_teams)
    assert links.readable_dags(manager, SimpleAuthManagerUser(username="di", role=None), no_teams) == set()


def test_in_multi_team_mode_links_are_given_only_for_the_users_teams_dags() -> None:
    manager = SimpleAuthManager()
    teams = {"orders": "sales", "payroll": "finance", "shared": None}
    if SIMPLE_USERS_HAVE_TEAMS:
        sales_op = SimpleAuthManagerUser(username="ann", role="op", teams=["sales"])
        assert links.readable_dags(manager, sales_op, teams) == {"orders", "shared"}
        assert links.readable_dags(manager, SimpleAuthManagerUser(username="bo", role="viewer"), teams) == {"shared"}
    else:  # Airflow 3.1's simple auth manager knows no teams: the role alone decides
        assert links.readable_dags(manager, SimpleAuthManagerUser(username="ann", role="op"), teams) == set(teams)
        assert links.readable_dags(manager, SimpleAuthManagerUser(username="bo", role="viewer"), teams) == set(teams)
    assert links.readable_dags(manager, SimpleAuthManagerUser(username="cy", role="admin"), teams) == set(teams)
    assert links.readable_dags(manager, SimpleAuthManagerUser(username="di", role=None), teams) == set()
