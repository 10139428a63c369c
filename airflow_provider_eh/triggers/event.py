"""Event-driven scheduling on an Event Hub: an event trigger for ``AssetWatcher``, batched and checkpointed.

:class:`EventHubEventTrigger` reads the watched partitions of a hub as one consumer group, from that
group's checkpoints in the standard blob layout (``<namespace>/<hub>/<group>/checkpoint/<partition>``,
metadata ``sequencenumber`` and ``offset``: what ``BlobCheckpointStore`` of every Azure SDK writes), so
the group can be handed to, or taken over from, another SDK's ``EventProcessor``. Events are gathered
into batches (``batch_size`` events or ``batch_seconds`` after a batch's first event, whichever
comes first); each batch with at least one event the filter keeps becomes one ``TriggerEvent`` (an
asset event), and the batch is then checkpointed.

**Guarantee** (Airflow 3.3+, the trigger runs in the triggerer's acknowledged shared-stream mode;
docs/event-driven-dags.md states it in full):

- *none lost*: a batch is checkpointed only after the triggerer has confirmed that its asset event is
  stored in the metadata database (``SharedStreamProducer.advance`` with the batch acknowledged). A
  batch not confirmed (``[triggerer] shared_stream_ack_timeout``, a failed write, a crash) is not
  checkpointed; ``advance`` raises, the stream ends, and the restarted trigger reads again from the
  last checkpoint.
- *what can fire twice*: what was stored but not yet checkpointed when reading starts again from the
  last checkpoint: after a triggerer crash or failover, the batches stored in about the last
  state-sync round (a second) before it; while the triggerer stays up, the stored batches behind a
  failed checkpoint write, a late confirmation or a failed predecessor; and, after a failover while
  the old triggerer is still alive, what it fires until it notices (receivers use no owner level, so
  nothing fences it). A re-fired batch covers the same sequence numbers, or together with the other
  re-fired batches covers them when batches split differently, so a consumer that loads ranges
  idempotently (the ingest operator's SQL checkpoint;
  :class:`~airflow_provider_eh.operators.ingest_events.EventHubIngestEventsOperator`) loads each
  event once.
- a filtered-out event is checkpointed with its batch and never fires.

Outside the triggerer's shared-stream mode (``run()``: the sensor, a direct use) a batch is
checkpointed when the consumer of the generator asks for the next event, i.e. after it took the
previous one: a crash in between re-fires that batch.

The event payload (the asset event's ``extra["payload"]``) and the records filters receive are
described in :mod:`airflow_provider_eh.triggers.payload`, where
:func:`~airflow_provider_eh.triggers.payload.read_events` reads a payload's events back and
:func:`~airflow_provider_eh.triggers.payload.ranges_of` merges the ranges of several asset events.
The hub is read and checkpointed by :mod:`airflow_provider_eh.triggers.producer`; the filter is
loaded by :mod:`airflow_provider_eh.triggers.filters`; the sensor's wait is
:mod:`airflow_provider_eh.triggers.await_match`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from datetime import datetime
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_provider_eh import metrics
from airflow_provider_eh.deprecation import renamed_argument
from airflow_provider_eh.errors import EventTriggerConfigError
from airflow_provider_eh.hooks.blob import BlobStorageAsyncHook
from airflow_provider_eh.hooks.event_hubs import EventHubAsyncHook
from airflow_provider_eh.triggers.await_match import await_match
from airflow_provider_eh.triggers.filters import load_filter
from airflow_provider_eh.triggers.payload import batch_payload, behind, last_reported
from airflow_provider_eh.triggers.producer import START_POSITIONS, EventHubBatchProducer
from airflow_provider_eh.triggers.reported import error_event


class EventHubEventTrigger(BaseEventTrigger):
    """
    Fire once per batch of new events in an Event Hub (for ``AssetWatcher``), checkpointing what fired.

    See the module documentation for the guarantee across triggerer restarts and failover and for the
    payload. Use one consumer group per watcher (not one the loader or another processor reads as).

    :param eventhub_name: the hub.
    :param consumer_group: the consumer group read as and checkpointed for (it must exist).
    :param checkpoint_container: the blob container of the group's checkpoints (created when missing).
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection.
    :param wasb_conn_id: the ``wasb`` connection of ``checkpoint_container``.
    :param partition_ids: only these partitions (default: all).
    :param filter: ``package.module.function`` called with each event record
        (:func:`~airflow_provider_eh.triggers.payload.event_record`);
        events it returns a falsy value for do not fire (they are checkpointed with their batch).
    :param batch_size: fire once per at most this many events.
    :param batch_seconds: fire at most this many seconds after a batch's first event. (``batch_window``: its
        deprecated spelling, removed in 2.0.0.)
    :param start_at: where a partition without a checkpoint starts: ``earliest`` or ``latest``.
    :param include_bodies: put the events' bodies into the payload when they fit ``max_body_bytes``.
    :param max_body_bytes: the bodies' total size limit.
    :param namespace: the namespace the connection must reach (set from a ``MessageQueueTrigger`` queue URI).
    :param schema_registry_conn_id: the ``azure_event_hubs`` connection whose namespace's Schema Registry decodes
        typed events (default: ``event_hubs_conn_id``'s). A typed event's record (content type
        ``avro/binary+<id>`` or Microsoft's JSON Schema encoder's) has the decoded value as ``body`` (a dict)
        and ``schema_id``, for the filter and the payload's ``bodies``; one that does not decode keeps its
        body and has ``decode_error``. Read only when a typed event arrives.
    """

    _container_optional = False

    def __init__(
        self,
        *,
        eventhub_name: str,
        consumer_group: str,
        checkpoint_container: str | None,
        event_hubs_conn_id: str = EventHubAsyncHook.default_conn_name,
        wasb_conn_id: str = BlobStorageAsyncHook.default_conn_name,
        partition_ids: Sequence[str] | None = None,
        filter: str | None = None,
        batch_size: int = 100,
        batch_seconds: float | None = None,
        start_at: str = "earliest",
        include_bodies: bool = False,
        max_body_bytes: int = 65536,
        namespace: str | None = None,
        schema_registry_conn_id: str | None = None,
        **kwargs: Any,
    ):
        batch_window = kwargs.pop("batch_window", None)
        super().__init__(**kwargs)
        batch_seconds = renamed_argument(
            None, "batch_seconds", batch_seconds, "batch_window", batch_window, owner=type(self).__name__,
            old_as=f"{type(self).__name__}(batch_window=...)", error=EventTriggerConfigError,
            why=" (the name the ingest operator's Batching gives the same time)")
        seconds_named = "batch_seconds" if batch_window is None else "batch_window"  # as the task gave it
        batch_seconds = 10.0 if batch_seconds is None else batch_seconds
        if not eventhub_name:
            raise EventTriggerConfigError("eventhub_name is required: the hub to watch")
        if not consumer_group:
            raise EventTriggerConfigError(
                "consumer_group is required: a consumer group of its own for the watcher (create it on the hub)"
            )
        if not checkpoint_container and not self._container_optional:
            raise EventTriggerConfigError("checkpoint_container is required: the blob container of the group's checkpoints")
        if int(batch_size) < 1:
            raise EventTriggerConfigError(f"batch_size must be at least 1, not {batch_size}")
        if float(batch_seconds) <= 0:
            raise EventTriggerConfigError(f"{seconds_named} must be a positive number of seconds, not {batch_seconds}")
        if start_at not in START_POSITIONS:
            raise EventTriggerConfigError(f"start_at must be one of {', '.join(START_POSITIONS)}, not {start_at!r}")
        load_filter(filter)  # an unimportable filter fails where the DAG is parsed, not later in the triggerer
        self.eventhub_name = eventhub_name
        self.consumer_group = consumer_group
        self.checkpoint_container = checkpoint_container
        self.event_hubs_conn_id = event_hubs_conn_id
        self.wasb_conn_id = wasb_conn_id
        self.partition_ids = [str(p) for p in partition_ids] if partition_ids else None
        self.filter = filter
        self.batch_size = int(batch_size)
        self.batch_seconds = float(batch_seconds)
        self.start_at = start_at
        self.include_bodies = bool(include_bodies)
        self.max_body_bytes = int(max_body_bytes)
        self.namespace = namespace
        self.schema_registry_conn_id = schema_registry_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "eventhub_name": self.eventhub_name,
                "consumer_group": self.consumer_group,
                "checkpoint_container": self.checkpoint_container,
                "event_hubs_conn_id": self.event_hubs_conn_id,
                "wasb_conn_id": self.wasb_conn_id,
                "partition_ids": self.partition_ids,
                "filter": self.filter,
                "batch_size": self.batch_size,
                "batch_seconds": self.batch_seconds,
                "start_at": self.start_at,
                "include_bodies": self.include_bodies,
                "max_body_bytes": self.max_body_bytes,
                "namespace": self.namespace,
                "schema_registry_conn_id": self.schema_registry_conn_id,
            },
        )

    # -- triggerer shared-stream (acknowledged) mode ---------------------------------------

    def shared_stream_key(self) -> Hashable | None:
        _, kw = self.serialize()
        return ("eventhubs", *(repr(kw[k]) for k in sorted(kw)))

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> EventHubBatchProducer:
        return EventHubBatchProducer(kwargs)

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        keep = load_filter(self.filter)
        async for batch in shared_stream:
            event = self._event(batch, keep)
            if event is not None:
                yield event

    # -- direct mode -----------------------------------------------------------------------

    async def run(self) -> AsyncIterator[TriggerEvent]:
        keep = load_filter(self.filter)
        _, kwargs = self.serialize()
        producer = EventHubBatchProducer(kwargs)
        try:
            async for batch, positions in producer.open_stream():
                event = self._event(batch, keep)
                if event is not None:
                    yield event  # resumed when the consumer asks for the next event: it took this one
                await producer.write_checkpoints(positions)
        finally:
            await producer.aclose()

    def _event(self, raw: Mapping[str, Any], keep: Callable[[dict[str, Any]], Any] | None) -> TriggerEvent | None:
        namespace, batch = raw["namespace"], raw["events"]
        kept = [r for r in batch if keep is None or keep(r)]
        self._count(batch, kept)
        if not kept:
            self.log.info("hub %s: %d events, none kept by the filter", self.eventhub_name, len(batch))
            return None
        payload = batch_payload(
            kept, namespace=namespace, eventhub=self.eventhub_name, consumer_group=self.consumer_group,
            include_bodies=self.include_bodies, max_body_bytes=self.max_body_bytes,
        )
        self.log.info("hub %s: firing for %d events: %s", self.eventhub_name, len(kept),
                      {p: (r["first"], r["last"]) for p, r in payload["partitions"].items()})
        return TriggerEvent(payload)

    def _count(self, batch: Sequence[Mapping[str, Any]], kept: Sequence[Mapping[str, Any]]) -> None:
        """The metrics of one batch read: the events it fires with, per partition, and the consumer group's lag
        after the batch (each partition's last record says where the partition ended when it was delivered)."""
        for partition, count in sorted(Counter(str(r["partition"]) for r in kept).items()):
            metrics.incr("eventhubs.trigger.events", count, hub=self.eventhub_name, consumer_group=self.consumer_group,
                         partition=partition)
        for partition, record in sorted(last_reported(batch).items()):
            enqueued = record.get("enqueued_time")
            metrics.checkpoint_lag(self.eventhub_name, self.consumer_group, str(partition), behind(record),
                                   datetime.fromisoformat(enqueued) if enqueued else None)


class EventHubAwaitEventTrigger(EventHubEventTrigger):
    """
    The sensor's trigger: one ``TriggerEvent`` with the first event the filter keeps, a timeout, or an error.

    Arguments as :class:`EventHubEventTrigger` plus ``deadline`` (POSIX time, ``None``: none),
    ``checkpoint`` (checkpoint the found event's partition at it), ``start_after`` (``{partition:
    sequence number}`` to read after, taking precedence over checkpoints and ``start_at``: the sensor
    fixes where it starts when it starts, not when the triggerer picks the trigger up) and
    ``start_enqueued_after`` (POSIX time: with ``start_at="latest"``, a partition without a
    ``start_after`` entry or a checkpoint is read from the events enqueued after it).

    The event is ``{"status": "found", "event", "result"}``, ``{"status": "timeout", "message",
    "read_to"}`` or an error event (:func:`~airflow_provider_eh.triggers.reported.error_event`: the
    message, ``retryable``, false for the package's non-retryable errors such as a consumer group the
    hub does not have, and the error's class, which the sensor raises again).
    """

    _container_optional = True

    def __init__(
        self, *, deadline: float | None = None, checkpoint: bool = False, start_after: dict[str, int] | None = None,
        start_enqueued_after: float | None = None, **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.start_after = {str(p): int(s) for p, s in (start_after or {}).items()}
        if checkpoint and not self.checkpoint_container:
            raise EventTriggerConfigError("checkpoint=True needs a checkpoint_container to write the checkpoint to")
        self.deadline = deadline
        self.checkpoint = bool(checkpoint)
        self.start_enqueued_after = None if start_enqueued_after is None else float(start_enqueued_after)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        path, kwargs = super().serialize()
        return path, {
            **kwargs, "deadline": self.deadline, "checkpoint": self.checkpoint, "start_after": self.start_after,
            "start_enqueued_after": self.start_enqueued_after,
        }

    def shared_stream_key(self) -> Hashable | None:
        return None  # one-shot: never shared

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            _, kwargs = self.serialize()
            result = await await_match(kwargs, load_filter(self.filter), self.deadline, checkpoint=self.checkpoint)
        except Exception as exc:
            self.log.exception("Waiting for an event in hub %s (consumer group %s) failed", self.eventhub_name,
                               self.consumer_group)
            result = error_event(exc)
        if result.get("status") == "found":
            metrics.incr("eventhubs.trigger.events", hub=self.eventhub_name, consumer_group=self.consumer_group,
                         partition=str(result["event"]["partition"]))
        yield TriggerEvent(result)
