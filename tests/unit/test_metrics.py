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
        assert set(metric.tags) <= {"hub", "producer_group", "partition", "consumer_group", "fence"}
        assert metric.kind != "timer" or metric.unit == "milliseconds"
        # OpenTelemetry drops a name over 63 characters, Airflow's default prefix included
        assert len(f"airflow.{name}") <= 63


def _emitted_names() -> dict[str, set[str]]:
    """Every ``eventhubs.*`` string of the package outside metrics.py, with the file(s) it is in."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name == "metrics.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("eventhubs."):
                found.setdefault(node.value, set()).add(str(path.relative_to(PACKAGE)))
    return found


def test_the_package_names_only_metrics_of_the_table() -> None:
    assert set(_emitted_names()) - set(metrics.METRICS) == set(), "names not in METRICS"


def test_every_emitting_call_with_a_written_name_matches_the_metrics_kind() -> None:
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "metrics"
                    and node.func.attr in EMITTERS and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            name = node.args[0].value
            assert metrics.METRICS[name].kind == EMITTERS[node.func.attr], f"{path.name}:{node.lineno} {name}"


# -- the helpers ---------------------------------------------------------------------------------


def test_the_helpers_send_the_name_the_value_and_the_known_tags_as_text(stats: FakeStats) -> None:
    metrics.incr("eventhubs.publish.events.sent", 5, hub="orders", producer_group="g", partition=3)
    metrics.gauge("eventhubs.checkpoint.lag", 7, hub="orders", consumer_group="$Default", partition="0")
    metrics.timing("eventhubs.publish.duration", 1.5, hub=None, producer_group="g")
    assert stats.sent == [
        ("counter", "eventhubs.publish.events.sent", 5, {"hub": "orders", "producer_group": "g", "partition": "3"}),
        ("gauge", "eventhubs.checkpoint.lag", 7, {"hub": "orders", "consumer_group": "$Default", "partition": "0"}),
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
