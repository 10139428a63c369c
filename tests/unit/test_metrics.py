"""The metrics: one table, helpers that send only its names and never fail a task, and the paths that emit them.

A fake ``Stats`` records what would reach Airflow's; no Airflow metrics backend, no network.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import airflow_provider_eh
from airflow_provider_eh import metrics
from airflow_provider_eh.checkpoints.lag import CheckpointProgress, PartitionLag
from airflow_provider_eh.errors import ServiceBusyError
from airflow_provider_eh.ingest.processor import BatchResult
from airflow_provider_eh.ingest.runner import IngestedBatch
from airflow_provider_eh.operators.ingest import EventHubIngestOperator
from airflow_provider_eh.operators.publish import EventHubPublishOperator
from airflow_provider_eh.publishing import PartitionResult
from airflow_provider_eh.publishing.driver import Progress, carry_progress
from airflow_provider_eh.triggers.event import EventHubEventTrigger

PACKAGE = Path(airflow_provider_eh.__file__).parent
EMITTERS = {"incr": "counter", "gauge": "gauge", "timing": "timer"}


class FakeStats:
    """Records every call as ``(kind, name, value, tags)``."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any, dict[str, str]]] = []

    def incr(self, stat: str, count: int = 1, *, tags: dict[str, str]) -> None:
        self.sent.append(("counter", stat, count, tags))

    def gauge(self, stat: str, value: float, *, tags: dict[str, str]) -> None:
        self.sent.append(("gauge", stat, value, tags))

    def timing(self, stat: str, dt: timedelta, *, tags: dict[str, str]) -> None:
        self.sent.append(("timer", stat, dt, tags))

    def named(self, name: str) -> list[tuple[Any, dict[str, str]]]:
        return [(value, tags) for _, stat, value, tags in self.sent if stat == name]


@pytest.fixture
def stats(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeStats]:
    fake = FakeStats()
    monkeypatch.setattr(metrics, "_stats", lambda: fake)
    yield fake


# -- the table -----------------------------------------------------------------------------------


def test_every_metric_is_under_the_prefix_with_a_kind_a_unit_known_tags_and_a_meaning() -> None:
    assert len(metrics.METRICS) >= 18
    for name, metric in metrics.METRICS.items():
        assert name == metric.name and name.startswith("eventhubs.")
        assert metric.kind in ("counter", "gauge", "timer") and metric.unit and metric.meaning.endswith(".")
        assert set(metric.tags) <= {"hub", "producer_group", "partition", "consumer_group", "fence", "operation",
                                    "backend"}
        assert metric.kind != "timer" or metric.unit == "milliseconds"
        # OpenTelemetry drops a name over 63 characters, Airflow's default prefix included
        assert len(f"airflow.{name}") <= 63


def _emitted_names() -> dict[str, set[str]]:
    """Every ``eventhubs.<name>`` string of the package outside metrics.py, with the file(s) it is in (the bare prefix
    ``eventhubs.``, which the Spark reader strips from the Scala connector's option names, names no metric)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "metrics.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("eventhubs.") \
                    and node.value != "eventhubs.":
                found.setdefault(node.value, set()).add(str(path.relative_to(PACKAGE)))
    return found


def test_the_package_names_only_metrics_of_the_table_and_emits_every_one() -> None:
    emitted = _emitted_names()
    assert set(emitted) - set(metrics.METRICS) == set(), "names not in METRICS"
    assert set(metrics.METRICS) - set(emitted) - {"eventhubs.checkpoint.lag", "eventhubs.checkpoint.lag_seconds"} == set(), \
        "metrics nothing emits"


def test_every_emitting_call_with_a_written_name_matches_the_metrics_kind() -> None:
    calls = 0
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "metrics"
                    and node.func.attr in EMITTERS and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            calls += 1
            name = node.args[0].value
            assert metrics.METRICS[name].kind == EMITTERS[node.func.attr], f"{path.name}:{node.lineno} {name}"
    assert calls >= 12


# -- the helpers ---------------------------------------------------------------------------------


def test_the_helpers_send_the_name_the_value_and_the_known_tags_as_text(stats: FakeStats) -> None:
    metrics.incr("eventhubs.publish.events.sent", 5, hub="orders", producer_group="g", partition=3)
    metrics.gauge("eventhubs.checkpoint.lag", 7, hub="orders", consumer_group="$Default", partition="0")
    metrics.timing("eventhubs.publish.duration", 1.5, hub=None, producer_group="g")
    assert stats.sent == [
        ("counter", "eventhubs.publish.events.sent", 5, {"hub": "orders", "producer_group": "g", "partition": "3"}),
        # a character StatsD's tags cannot carry becomes "_", for every backend alike
        ("gauge", "eventhubs.checkpoint.lag", 7, {"hub": "orders", "consumer_group": "_Default", "partition": "0"}),
        ("timer", "eventhubs.publish.duration", timedelta(milliseconds=1500), {"producer_group": "g"}),  # no hub known
    ]


def test_a_counter_of_nothing_sends_nothing(stats: FakeStats) -> None:
    metrics.incr("eventhubs.publish.events.resent", 0, hub="orders", producer_group="g", partition="0")
    assert stats.sent == []


@pytest.mark.parametrize(("call", "message"), [
    (lambda: metrics.incr("eventhubs.publish.events.lost", hub="h"), "'eventhubs.publish.events.lost' is not a metric"),
    (lambda: metrics.gauge("eventhubs.publish.events.sent", 1), "'eventhubs.publish.events.sent' is a counter, not a gauge"),
    (lambda: metrics.timing("eventhubs.checkpoint.lag", 1.0), "'eventhubs.checkpoint.lag' is a gauge, not a timer"),
    (lambda: metrics.incr("eventhubs.ingest.rows", 1, hub="h", connection_string="Endpoint=sb://x"),
     "'eventhubs.ingest.rows' has no tag connection_string"),
], ids=["unknown name", "counter as gauge", "gauge as timer", "undeclared tag"])
def test_a_name_kind_or_tag_the_table_does_not_declare_is_refused(stats: FakeStats, call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
    assert stats.sent == []


class BrokenStats:
    def incr(self, *args: Any, **kwargs: Any) -> None:
        raise OSError("the StatsD socket is gone")

    gauge = timing = incr


def test_a_failing_metrics_backend_never_fails_the_caller_and_is_logged_at_debug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(metrics, "_stats", BrokenStats)
    with caplog.at_level(logging.DEBUG, logger=metrics.__name__):
        metrics.incr("eventhubs.ingest.batches", hub="h", consumer_group="c", partition="0")
        metrics.gauge("eventhubs.checkpoint.lag", 3, hub="h", consumer_group="c", partition="0")
        metrics.timing("eventhubs.ingest.batch.duration", 0.2, hub="h", consumer_group="c", partition="0")
    assert [r.levelno for r in caplog.records] == [logging.DEBUG] * 3
    assert "metric eventhubs.ingest.batches not emitted: the StatsD socket is gone" in caplog.text


def test_an_airflow_without_stats_never_fails_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Any:
        raise ImportError("cannot import name 'Stats'")

    monkeypatch.setattr(metrics, "_stats", missing)
    metrics.incr("eventhubs.trigger.events", 2, hub="h", consumer_group="c", partition="0")


def test_the_real_stats_of_the_installed_airflow_takes_the_calls() -> None:
    """Without ``[metrics]`` turned on, Airflow's own ``Stats`` (found through common-compat) takes every kind."""
    assert callable(metrics._stats().incr)
    metrics.incr("eventhubs.trigger.events", 2, hub="h", consumer_group="c", partition="0")
    metrics.gauge("eventhubs.checkpoint.lag", 3, hub="h", consumer_group="c", partition="0")
    metrics.timing("eventhubs.readback.duration", 0.25, hub="h", producer_group="g", partition="0")


def test_the_lag_in_seconds_is_the_checkpointed_events_age_while_events_wait(stats: FakeStats) -> None:
    now = datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC)
    enqueued = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
    metrics.checkpoint_lag("orders", "loader", "1", 40, enqueued, now=now)
    metrics.checkpoint_lag("orders", "loader", "2", 0, enqueued, now=now)
    metrics.checkpoint_lag("orders", "loader", "3", 5)  # the enqueued time is not known
    metrics.checkpoint_lag("orders", "loader", "4", None, enqueued, now=now)  # nor the lag
    assert [(v, t["partition"]) for v, t in stats.named("eventhubs.checkpoint.lag")] == [(40, "1"), (0, "2"), (5, "3")]
    assert [(v, t["partition"]) for v, t in stats.named("eventhubs.checkpoint.lag_seconds")] == [(30.0, "1"), (0.0, "2")]


# -- what the paths emit -------------------------------------------------------------------------


def _totals(stats: FakeStats, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for value, tags in stats.named(name):
        out[tags.get("partition", "")] = out.get(tags.get("partition", ""), 0) + value
    return out


def test_a_publish_counts_each_partitions_outcome(stats: FakeStats) -> None:
    operator = EventHubPublishOperator(task_id="publish", events=[], eventhub_name="orders", producer_group="daily",
                                       partition_options={2: {"producer_group": "daily-p2"}})
    operator.report("b" * 64, {
        "0": PartitionResult("0", 10, 0, 9, 9, "published", fencing="hub"),
        "1": PartitionResult("1", 10, 0, 9, 19, "recovered", landed_count=6, resent=4, fencing="lease",
                             readback_seconds=0.5),
        "2": PartitionResult("2", 8, 0, 7, 7, "already_committed", fencing="hub"),
    })
    assert _totals(stats, "eventhubs.publish.events.sent") == {"0": 10, "1": 4}
    assert _totals(stats, "eventhubs.publish.events.resent") == {"1": 4}
    assert _totals(stats, "eventhubs.publish.events.suppressed") == {"1": 6, "2": 8}
    assert _totals(stats, "eventhubs.publish.batches.published") == {"0": 1}
    assert _totals(stats, "eventhubs.publish.batches.recovered") == {"1": 1}
    assert _totals(stats, "eventhubs.publish.batches.already_committed") == {"2": 1}
    assert [t["fence"] for _, t in stats.named("eventhubs.publish.fenced")] == ["hub", "lease"]  # not the re-run's
    assert stats.named("eventhubs.readback.duration") == [
        (timedelta(milliseconds=500), {"hub": "orders", "producer_group": "daily", "partition": "1"})]
    assert {t["producer_group"] for _, t in stats.named("eventhubs.publish.batches.already_committed")} == {"daily-p2"}


def test_a_failed_publish_counts_what_it_committed_what_it_left_and_its_time(stats: FakeStats) -> None:
    operator = EventHubPublishOperator(task_id="publish", events=[], eventhub_name="orders", producer_group="daily")
    committed = {"0": PartitionResult("0", 10, 0, 9, 9, "published", fencing="hub")}
    with pytest.raises(ServiceBusyError), operator.measured():
        raise carry_progress(ServiceBusyError("the hub is busy"), Progress.of(["0", "1", "2"], committed))
    assert _totals(stats, "eventhubs.publish.batches.published") == {"0": 1}
    assert _totals(stats, "eventhubs.publish.events.sent") == {"0": 10}
    assert _totals(stats, "eventhubs.publish.batches.partial") == {"1": 1, "2": 1}
    ((duration, tags),) = stats.named("eventhubs.publish.duration")
    assert isinstance(duration, timedelta) and tags == {"hub": "orders", "producer_group": "daily"}


def test_a_publish_that_fails_before_any_claim_counts_only_its_time(stats: FakeStats) -> None:
    operator = EventHubPublishOperator(task_id="publish", events=[], producer_group="daily")
    with pytest.raises(ValueError), operator.measured():
        raise ValueError("event 3: no partition")
    assert [name for _, name, _, _ in stats.sent] == ["eventhubs.publish.duration"]


def test_an_ingested_batch_counts_rows_dead_letters_duplicates_its_time_and_the_lag(stats: FakeStats) -> None:
    operator = EventHubIngestOperator(task_id="ingest", table="orders", consumer_group="loader")
    enqueued = datetime.now(UTC) - timedelta(seconds=120)
    counts = BatchResult(events=12, rows=9, duplicates=2, dead_letters=1)
    operator.count("orders", IngestedBatch("3", counts, 0.04, 250, enqueued))
    tags = {"hub": "orders", "consumer_group": "loader", "partition": "3"}
    assert [(kind, name, value) for kind, name, value, _ in stats.sent[:4]] == [
        ("counter", "eventhubs.ingest.batches", 1), ("counter", "eventhubs.ingest.rows", 9),
        ("counter", "eventhubs.ingest.dead_letters", 1), ("counter", "eventhubs.ingest.duplicates", 2),
    ]
    assert stats.named("eventhubs.ingest.batch.duration") == [(timedelta(milliseconds=40), tags)]
    assert stats.named("eventhubs.checkpoint.lag") == [(250, tags)]
    ((seconds, _),) = stats.named("eventhubs.checkpoint.lag_seconds")
    assert 119 < seconds < 180
    assert all(t == tags for *_, t in stats.sent)


def test_a_checkpoint_read_sets_each_groups_lag_on_each_partition(stats: FakeStats) -> None:
    progress = CheckpointProgress("orders", "checkpoints", (
        PartitionLag("analytics", "0", target=10, checkpoint=4, last_enqueued=12),
        PartitionLag("analytics", "1", target=10, checkpoint=None, last_enqueued=None),  # lag unknown: nothing set
        PartitionLag("billing", "0", target=10, checkpoint=12, last_enqueued=12),
    ))
    metrics.checkpoint_lags(progress)
    assert stats.named("eventhubs.checkpoint.lag") == [
        (8, {"hub": "orders", "consumer_group": "analytics", "partition": "0"}),
        (0, {"hub": "orders", "consumer_group": "billing", "partition": "0"}),
    ]


def only_paid(record: dict[str, Any]) -> bool:
    return record["properties"].get("type") == "paid"


def test_the_event_trigger_counts_the_events_it_fires_with_and_the_lag_after_its_batch(stats: FakeStats) -> None:
    trigger = EventHubEventTrigger(eventhub_name="orders", consumer_group="watcher", checkpoint_container="cp",
                                   filter=f"{__name__}.only_paid")
    enqueued = (datetime.now(UTC) - timedelta(seconds=60)).isoformat()

    def record(partition: str, seq: int, kind: str) -> dict[str, Any]:
        return {"partition": partition, "sequence_number": seq, "offset": str(seq), "enqueued_time": enqueued,
                "properties": {"type": kind}, "body": "{}", "last_enqueued": 20}

    batch = [record("0", 5, "paid"), record("0", 6, "paid"), record("1", 19, "refund"), record("1", 20, "paid")]
    assert trigger._event({"namespace": "ns", "events": batch}, only_paid) is not None
    tags = {"hub": "orders", "consumer_group": "watcher"}
    assert stats.named("eventhubs.trigger.events") == [(2, {**tags, "partition": "0"}), (1, {**tags, "partition": "1"})]
    assert stats.named("eventhubs.checkpoint.lag") == [(14, {**tags, "partition": "0"}), (0, {**tags, "partition": "1"})]
    assert [round(v) for v, _ in stats.named("eventhubs.checkpoint.lag_seconds")] == [60, 0]


def test_the_state_stores_of_the_hook_time_their_ledger_operations_by_operation_and_backend(stats: FakeStats) -> None:
    from airflow_provider_eh.hooks.producer_state import ProducerStateHook
    from airflow_provider_eh.publishing import StateKey

    store = ProducerStateHook("variable").get_store()
    assert store.on_operation is not None
    store.on_operation("claim", StateKey("ns", "orders", "daily", "2"), 0.125)
    assert stats.named("eventhubs.ledger.duration") == [(timedelta(milliseconds=125), {
        "hub": "orders", "producer_group": "daily", "partition": "2", "operation": "claim", "backend": "variable"})]
