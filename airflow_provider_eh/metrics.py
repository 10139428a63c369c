"""Every metric the provider emits, in one table, and the three calls that emit them through Airflow's ``Stats``.

:data:`METRICS` names each metric (under ``eventhubs.``), its kind, unit, tags and meaning;
``docs/metrics.md`` shows the same table (``tests/docs/test_metrics_page.py`` keeps them equal). The
operators, the sensor and the triggers emit with :func:`incr`, :func:`gauge` and :func:`timing`,
which send to whatever ``[metrics]`` turns on (StatsD, Datadog, OpenTelemetry), or nowhere.

A metric never fails a task: Airflow's ``Stats`` is imported when a metric is emitted, and anything
it raises is logged at debug level and dropped. A name that is not in :data:`METRICS`, a call of
another kind than the metric's, or a tag the metric does not declare raises ``ValueError``: that is
a mistake in this package, which its unit tests find. Tags carry hub, group and partition names
only, never a connection's fields; a character other than a letter, a digit or ``_.-/`` in a tag's
value is sent as ``_`` (the consumer group ``$Default`` as ``_Default``).

The engines (``publishing/``, ``ingest/``) import no Airflow: they return what happened (a partition's
result with its read-back time, an ingested batch) and the Airflow layer emits it. The producer state
store times its own operations and tells a callback the hook gives it
(:meth:`~airflow_provider_eh.hooks.producer_state.ProducerStateHook.get_store`), which emits them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from airflow_provider_eh.checkpoints.lag import CheckpointProgress

log = logging.getLogger(__name__)

Kind = Literal["counter", "gauge", "timer"]

#: what a tag value keeps: Airflow's StatsD logger drops a whole metric whose InfluxDB-style tag holds another
#: character (``$Default``), so every other character is sent as ``_``, to every backend alike
_TAG_VALUE_OUTSIDE = re.compile(r"[^A-Za-z0-9_./-]")

PUBLISH_TAGS = ("hub", "producer_group", "partition")
CONSUMER_TAGS = ("hub", "consumer_group", "partition")


@dataclass(frozen=True)
class Metric:
    """
    One metric the provider emits.

    :param name: its name, under ``eventhubs.`` (Airflow adds its own prefix, ``airflow.`` by default).
    :param kind: ``counter``, ``gauge`` or ``timer`` (timers are in milliseconds).
    :param unit: what one count or value is.
    :param tags: the tags every emission carries (a tag whose value is not known is left out).
    :param meaning: what it counts or measures.
    """

    name: str
    kind: Kind
    unit: str
    tags: tuple[str, ...]
    meaning: str


METRICS: dict[str, Metric] = {metric.name: metric for metric in (
    Metric("eventhubs.publish.events.sent", "counter", "events", PUBLISH_TAGS,
           "Events a publish sent and committed on a partition: a new batch's events, or the ones recovery "
           "sent again because they had not landed."),
    Metric("eventhubs.publish.events.resent", "counter", "events", PUBLISH_TAGS,
           "Of the events sent, those recovery sent again after an attempt in doubt (a crash, a lost "
           "connection): they had not landed."),
    Metric("eventhubs.publish.events.suppressed", "counter", "events", PUBLISH_TAGS,
           "Events not sent again because they are in the hub already: every event of a batch a re-run finds "
           "committed, and the events recovery's read-back finds landed."),
    Metric("eventhubs.publish.batches.published", "counter", "batches", PUBLISH_TAGS,
           "Partition batches committed at their first send."),
    Metric("eventhubs.publish.batches.recovered", "counter", "batches", PUBLISH_TAGS,
           "Partition batches committed by recovery: an earlier attempt was in doubt, the partition was read "
           "back and only the missing events were sent."),
    Metric("eventhubs.publish.batches.already_committed", "counter", "batches", PUBLISH_TAGS,
           "Partition batches a re-run (a retry, a clear, a backfill) found committed: nothing sent."),
    Metric("eventhubs.publish.batches.partial", "counter", "batches", PUBLISH_TAGS,
           "Partition batches a failed publish left uncommitted: their intent stays, and a later try "
           "resumes them (its recovery reads back what landed)."),
    Metric("eventhubs.publish.fenced", "counter", "batches", (*PUBLISH_TAGS, "fence"),
           "Partition batches sent under a fence, by fence: `hub` (the hub refuses a stalled publisher's "
           "sends) or `lease` (the claim's deadline alone)."),
    Metric("eventhubs.publish.duration", "timer", "milliseconds", ("hub", "producer_group"),
           "One try of a publish task, every partition, from reading its connections to the last commit (with "
           "Spark, the session and the passes over the output too), whether it succeeded or failed."),
    Metric("eventhubs.readback.duration", "timer", "milliseconds", PUBLISH_TAGS,
           "Reading a partition back to settle a batch in doubt before a publish sends (recovery)."),
    Metric("eventhubs.ledger.duration", "timer", "milliseconds", (*PUBLISH_TAGS, "operation", "backend"),
           "One operation on a partition's ledger in the producer state store, by `operation`: `claim`, `write` "
           "(the intent before a send, the commit after it), `read`, `lookup` (is the batch committed), `record` "
           "(a committed batch's records), `release`, `prune`, `history`; `backend` `blob` or `variable`."),
    Metric("eventhubs.ingest.rows", "counter", "rows", CONSUMER_TAGS,
           "Rows the ingest operator wrote to its table, committed with their SQL checkpoint."),
    Metric("eventhubs.ingest.dead_letters", "counter", "events", CONSUMER_TAGS,
           "Events the row function or the table refused, written to the dead-letter table."),
    Metric("eventhubs.ingest.duplicates", "counter", "events", CONSUMER_TAGS,
           "Events skipped as duplicates: at or below their producer group's `eh.seq` high-water mark."),
    Metric("eventhubs.ingest.batches", "counter", "batches", CONSUMER_TAGS,
           "Batches ingested, each one SQL transaction with its checkpoint."),
    Metric("eventhubs.ingest.batch.duration", "timer", "milliseconds", CONSUMER_TAGS,
           "One ingested batch, from the start of its processing (rows, dedupe, dead letters) to its SQL "
           "transaction committed; receiving it is not counted."),
    Metric("eventhubs.checkpoint.lag", "gauge", "events", CONSUMER_TAGS,
           "Events enqueued after the consumer group's checkpoint: from the checkpoint sensor's pokes and "
           "its trigger's polls, from the ingest operator after each batch, from the event trigger after "
           "each batch it read, from the Event Hubs view's lag sampler for each sample it writes."),
    Metric("eventhubs.checkpoint.lag_seconds", "gauge", "seconds", CONSUMER_TAGS,
           "How long ago the checkpointed event was enqueued while newer events wait (0 when none waits): from "
           "the ingest operator and the event trigger, which know each event's enqueued time."),
    Metric("eventhubs.trigger.events", "counter", "events", CONSUMER_TAGS,
           "Events a trigger yielded: those of the event trigger's asset events (after its filter), and the "
           "event the waiting sensor's trigger found."),
)}


def _checked(name: str, kind: Kind, tags: Mapping[str, Any]) -> dict[str, str]:
    """The tags to send (those with a value, as text), once ``name``, ``kind`` and the tags' names are the table's."""
    metric = METRICS.get(name)
    if metric is None:
        raise ValueError(f"{name!r} is not a metric of the provider; add it to airflow_provider_eh.metrics.METRICS")
    if metric.kind != kind:
        raise ValueError(f"{name!r} is a {metric.kind}, not a {kind}")
    undeclared = sorted(set(tags) - set(metric.tags))
    if undeclared:
        raise ValueError(f"{name!r} has no tag {', '.join(undeclared)}; its tags: {', '.join(metric.tags)}")
    return {key: _TAG_VALUE_OUTSIDE.sub("_", str(value)) for key, value in tags.items() if value is not None and value != ""}


def _stats() -> Any:
    """Airflow's ``Stats`` (its module moved between Airflow minors; common-compat finds it)."""
    from airflow.providers.common.compat.sdk import Stats

    return Stats


#: a metric's kind -> the call of Airflow's ``Stats`` that sends it
_CALLS: dict[Kind, str] = {"counter": "incr", "gauge": "gauge", "timer": "timing"}


def _send(kind: Kind, name: str, value: Any, tags: Mapping[str, Any]) -> None:
    sent = _checked(name, kind, tags)
    try:
        getattr(_stats(), _CALLS[kind])(name, value, tags=sent)
    except Exception as exc:  # a metric never fails a task
        log.debug("metric %s not emitted: %s", name, exc)


def incr(name: str, count: int = 1, /, **tags: Any) -> None:
    """Add ``count`` to the counter ``name`` (nothing is sent for 0)."""
    if count > 0:
        _send("counter", name, count, tags)
    else:
        _checked(name, "counter", tags)


def gauge(name: str, value: float, /, **tags: Any) -> None:
    """Set the gauge ``name`` to ``value``."""
    _send("gauge", name, value, tags)


def timing(name: str, seconds: float, /, **tags: Any) -> None:
    """Record ``seconds`` in the timer ``name`` (sent as milliseconds)."""
    _send("timer", name, timedelta(seconds=seconds), tags)


def checkpoint_lag(hub: str | None, consumer_group: str, partition: str, lag: int | None,
                   enqueued_time: datetime | None = None, *, now: datetime | None = None) -> None:
    """
    Set a consumer group's lag on a partition: ``eventhubs.checkpoint.lag`` when ``lag`` (events) is
    known, and ``eventhubs.checkpoint.lag_seconds`` when the checkpointed event's ``enqueued_time``
    is known too: 0 when nothing waits, else how long ago it was enqueued.
    """
    if lag is None:
        return
    tags = {"hub": hub, "consumer_group": consumer_group, "partition": partition}
    gauge("eventhubs.checkpoint.lag", lag, **tags)
    if enqueued_time is None:
        return
    if enqueued_time.tzinfo is None:  # the service's times are UTC
        enqueued_time = enqueued_time.replace(tzinfo=UTC)
    behind = 0.0 if lag == 0 else max(0.0, ((now or datetime.now(UTC)) - enqueued_time).total_seconds())
    gauge("eventhubs.checkpoint.lag_seconds", behind, **tags)


def checkpoint_lags(progress: CheckpointProgress) -> None:
    """Each consumer group's lag on each target partition of a checkpoint read (the sensor's and its trigger's)."""
    for lag in progress.lags:
        checkpoint_lag(progress.eventhub_name, lag.consumer_group, lag.partition_id, lag.lag)

