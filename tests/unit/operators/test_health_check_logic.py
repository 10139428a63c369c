"""The health check's decision, pure: which open batches and lags are problems at a given time, how each is
named and what it says to do; the arguments it refuses; a ledger's open batches and their ages."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_eh.checkpoints.lag import PartitionLag
from airflow_provider_eh.operators.health_check import EventHubHealthCheckOperator, assess, duration_text
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.open_batches import OpenBatch, is_stale, open_batches
from airflow_provider_eh.publishing.records import PartialBatch, PendingIntent

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
ORIGIN = {"dag_id": "daily", "task_id": "publish", "run_id": "scheduled__2026-11-27", "map_index": -1, "try_number": 2}


def batch(kind: str = "pending", minutes: float | None = 45, **fields: object) -> OpenBatch:
    since = None if minutes is None else NOW - timedelta(minutes=minutes)
    values = {"group": "daily.publish", "partition": "3", "kind": kind, "batch_id": "ab" * 32, "events": 100,
              "landed": None if kind == "pending" else 40, "since": since, "origin": ORIGIN, **fields}
    return OpenBatch(**values)  # type: ignore[arg-type]


def test_a_ledgers_open_batches_are_its_pending_one_then_its_partial_ones_with_their_start_times() -> None:
    state = ProducerState.new(StateKey("ns", "orders", "g", "1"))
    started = NOW - timedelta(minutes=50)
    state.pending = PendingIntent("p" * 64, 0, None, 7, "fp", 1, -1, [], started_at=started.isoformat(), origin=ORIGIN)
    state.partial = {"b" * 64: PartialBatch(5, "fp", [[0, 2]], started_at=(NOW - timedelta(hours=3)).isoformat()),
                     "a" * 64: PartialBatch(4, "fp", [[1, 2], [3, 4]])}  # written before its start time was kept
    modified = NOW - timedelta(minutes=5)
    pending, older, newer = open_batches(state, modified)
    assert (pending.kind, pending.batch_id, pending.events, pending.landed, pending.since) == ("pending", "p" * 64, 7, None,
                                                                                               started)
    assert (older.kind, older.batch_id, older.landed, older.age_seconds(NOW)) == ("partial", "a" * 64, 2, 300.0)
    assert (newer.batch_id, newer.landed, newer.age_seconds(NOW)) == ("b" * 64, 2, 10800.0)
    assert [b.since for b in open_batches(state)][1] is None  # nothing to count its age from: unknown
    assert open_batches(ProducerState.new(StateKey("ns", "orders", "g", "2"))) == []


def test_a_batch_is_stale_only_past_the_bound_and_one_of_unknown_age_never() -> None:
    assert is_stale(1801.0, 1800) and not is_stale(1800.0, 1800) and not is_stale(None, 0)


def test_a_pending_batch_older_than_the_bound_is_named_with_its_age_and_the_task_instance_to_clear() -> None:
    report = assess("orders", NOW, ledgers={"daily.publish": 4}, batches=[batch(minutes=45), batch(minutes=10)],
                    max_batch_age_seconds=1800)
    (problem,) = report.problems
    assert not report.healthy
    assert problem.startswith(f"producer group 'daily.publish' partition 3: batch {'ab' * 32} (eh.batch {'ab' * 8}) "
                              "pending for 45 min (bound 30 min), 100 events; published by DAG 'daily' task 'publish' "
                              "run 'scheduled__2026-11-27' try 2.")
    assert "clear that task instance" in problem


def test_a_partial_batch_says_how_much_landed_and_that_only_its_own_task_instance_finishes_it() -> None:
    (problem,) = assess("orders", NOW, ledgers={"daily.publish": 4},
                        batches=[batch("partial", minutes=125, origin=None)], max_batch_age_seconds=3600).problems
    assert "partial for 2 h 05 min (bound 1 h 00 min), 100 events, 40 of them landed" in problem
    assert "published outside Airflow" in problem and "only a retry of that same task instance" in problem


def test_open_batches_within_the_bound_or_of_unknown_age_are_reported_not_failed() -> None:
    report = assess("orders", NOW, ledgers={"daily.publish": 4}, max_batch_age_seconds=3600,
                    batches=[batch(minutes=59), batch("partial", minutes=None)])
    assert report.healthy
    summary = report.summary()
    assert json.loads(json.dumps(summary)) == summary
    assert summary["producer_groups"]["daily.publish"]["ledgers"] == 4
    assert [(b["kind"], b["age_seconds"], b["stale"]) for b in summary["producer_groups"]["daily.publish"]["open_batches"]] \
        == [("pending", 3540.0, False), ("partial", None, False)]


def test_a_lag_over_the_bound_is_named_by_group_and_partition_with_its_checkpoint_and_owner() -> None:
    lags = [PartitionLag("analytics", "0", -1, 90, last_enqueued=100),  # 10 behind: at the bound
            PartitionLag("analytics", "1", -1, 40, last_enqueued=100, owner_id="loader-7", owned_since="2026-11-28T11:58"),
            PartitionLag("billing", "0", -1, None, last_enqueued=None)]  # lag not known
    report = assess("orders", NOW, ledgers={}, batches=[], max_batch_age_seconds=60, lags=lags, max_lag=10,
                    checkpoint_container="checkpoints")
    (problem,) = report.problems
    assert problem.startswith("consumer group 'analytics' partition 1: 60 events behind (bound 10): checkpoint at "
                              "sequence number 40, last enqueued 100; owned by 'loader-7' since 2026-11-28T11:58.")
    assert report.summary()["consumer_groups"] == {"analytics": {"0": 10, "1": 60}, "billing": {"0": None}}


def test_a_group_without_any_checkpoint_or_ledger_is_named_with_where_it_was_looked_for() -> None:
    report = assess("orders", NOW, ledgers={"daily.publsh": 0}, batches=[], max_batch_age_seconds=60,
                    lags=[PartitionLag("analytcs", "0", -1, None, last_enqueued=4)], max_lag=0,
                    groups_without_checkpoints=["analytcs"], checkpoint_container="checkpoints",
                    state_store="container 'state'")
    ledger, lag = report.problems
    assert ledger.startswith("producer group 'daily.publsh': no ledger on any partition of hub 'orders' in container "
                             "'state'. Check the group's name")
    assert "5 events behind" in lag and "no checkpoint at all in container 'checkpoints'" in lag
    assert "no consumer owns the partition" in lag


@pytest.mark.parametrize(("arguments", "message"), [
    ({}, "producer_groups and consumer_groups are both empty"),
    ({"producer_groups": ["g"], "max_batch_age": "soon"}, "max_batch_age='soon': give a timedelta or a number of seconds"),
    ({"producer_groups": ["g"], "max_batch_age": -5}, "max_batch_age=-5"),
    ({"producer_groups": [""]}, "producer_groups=['']: give a list of group names"),
    ({"consumer_groups": ["analytics"], "checkpoint_container": "c"}, "needs max_lag (events) and checkpoint_container"),
    ({"consumer_groups": "analytics", "max_lag": 10}, "needs max_lag (events) and checkpoint_container"),
    ({"consumer_groups": ["analytics"], "max_lag": 2.5, "checkpoint_container": "c"}, "max_lag=2.5: give a whole number"),
    ({"producer_groups": ["g"], "state_backend": "file"}, "state_backend 'file': choose one of blob, variable"),
], ids=["nothing", "age text", "negative age", "empty name", "no max_lag", "no container", "fraction", "backend"])
def test_wrong_arguments_are_refused_naming_the_argument(arguments: dict[str, object], message: str) -> None:
    operator = EventHubHealthCheckOperator(task_id="health", **arguments)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        operator.checked()


def test_the_bounds_may_be_rendered_templates_and_a_timedelta() -> None:
    operator = EventHubHealthCheckOperator(task_id="health", producer_groups="g", consumer_groups=["a"],
                                           max_batch_age="900", max_lag="1000", checkpoint_container="c")
    assert operator.checked() == (["g"], ["a"], 900.0, 1000)
    operator.max_batch_age = timedelta(hours=1)
    assert operator.checked()[2] == 3600.0 and operator.backend == "variable"
    operator.producer_groups, operator.consumer_groups = "['g', 'h']", '["a"]'  # lists rendered as text
    assert operator.checked()[:2] == (["g", "h"], ["a"])
    operator.producer_groups = "['g'"
    with pytest.raises(ValueError, match="producer_groups=\"\\['g'\": give a list of group names"):
        operator.checked()


def test_durations_read_as_people_say_them() -> None:
    assert [duration_text(s) for s in (0, 59.9, 60, 3599, 3600, 7500, 86400 * 2 + 3600 * 4)] == [
        "0 s", "59 s", "1 min", "59 min", "1 h 00 min", "2 h 05 min", "2 d 4 h"]
