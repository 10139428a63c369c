"""Event-driven scheduling on an Event Hub: an event trigger for ``AssetWatcher``, batched and checkpointed.

:class:`EventHubEventTrigger` reads the watched partitions of a hub as one consumer group, from that
group's checkpoints in the standard blob layout (``<namespace>/<hub>/<group>/checkpoint/<partition>``,
metadata ``sequencenumber`` and ``offset``: what ``BlobCheckpointStore`` of every Azure SDK writes), so
the group can be handed to, or taken over from, another SDK's ``EventProcessor``. Events are gathered
into batches (``batch_size`` events or ``batch_window`` seconds after a batch's first event, whichever
comes first); each batch with at least one event the filter keeps becomes one ``TriggerEvent`` (an
asset event), and the batch is then checkpointed.

**Guarantee** (Airflow 3.3+, the trigger runs in the triggerer's acknowledged shared-stream mode;
the README's "Event-driven DAGs" states it in full):

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
described in :mod:`airflow_provider_eh.triggers.payload`; :func:`read_events` reads a payload's events
back, :func:`ranges_of` merges the ranges of several asset events. The partitions are received through
:class:`~airflow_provider_eh.triggers.partition_stream.PartitionStream`.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_provider_eh.checkpoints.blob_layout import CHECKPOINT, partition_blob
from airflow_provider_eh.client.partitions import check_partition_ids
from airflow_provider_eh.errors import ConnectionUnreachableError, EventHubsProviderError, EventTriggerConfigError
from airflow_provider_eh.hooks.blob import BlobStorageAsyncHook
from airflow_provider_eh.hooks.checkpoints import CheckpointAsyncHook
from airflow_provider_eh.hooks.event_hubs import EventHubsAsyncHook
from airflow_provider_eh.triggers.partition_stream import PartitionStream, not_found, receive_error
from airflow_provider_eh.triggers.payload import batch_payload, event_record, ranges_of, read_events

try:  # Airflow 3.3+: acknowledged shared streams (persistence-gated checkpoints)
    from airflow.triggers.shared_stream import SharedStreamProducer
except ImportError:  # pragma: no cover - older Airflow: run() only
    SharedStreamProducer = object  # type: ignore[assignment,misc]

START_POSITIONS = ("earliest", "latest")

# Importable from here as before they moved to the payload and partition-stream modules.
__all__ = [
    "START_POSITIONS", "EventHubAwaitEventTrigger", "EventHubBatchProducer", "EventHubEventTrigger",
    "EventTriggerConfigError", "await_match", "batch_payload", "event_record", "gather_batches", "load_filter",
    "not_found", "ranges_of", "read_events", "read_summary", "receive_error",
]


def load_filter(path: str | None) -> Callable[[dict[str, Any]], Any] | None:
    """The function at ``package.module.function`` (or ``package.module:function``); ``None`` for none."""
    if not path:
        return None
    if not isinstance(path, str):
        raise EventTriggerConfigError(
            f"filter must be a dotted path 'package.module.function' (triggers are serialised), not {type(path).__name__}"
        )
    module_name, sep, name = path.partition(":") if ":" in path else path.rpartition(".")
    if not sep or not module_name or not name:
        raise EventTriggerConfigError(f"filter {path!r} is not a dotted path 'package.module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EventTriggerConfigError(
            f"filter {path!r}: module {module_name!r} cannot be imported ({exc}); put it on the triggerer's "
            "and the workers' Python path (a plugin or a package; the DAGs folder is not on the triggerer's path)"
        ) from exc
    func = getattr(module, name, None)
    if not callable(func):
        raise EventTriggerConfigError(f"filter {path!r}: module {module_name!r} has no function {name!r}")
    return func


class EventHubBatchProducer(SharedStreamProducer):
    """
    The broker side of the trigger: yields ``(batch, checkpoint positions)``; ``advance`` checkpoints.

    :param kwargs: the trigger's serialised kwargs.
    """

    def __init__(self, kwargs: Mapping[str, Any]):
        self.kw = dict(kwargs)
        self.start: dict[str, int | datetime] = {}  # partition -> read after this sequence number or enqueued time
        self.read_to: dict[str, int] = {}  # partition -> last sequence number received (-1: none)
        self.endpoint: Any = None
        self._blob: BlobStorageAsyncHook | None = None
        self._container: Any = None
        self._after: dict[str, int | datetime] | None = None

    # -- reading ---------------------------------------------------------------------------

    async def _prepare(self) -> dict[str, int | datetime]:
        kw = self.kw
        endpoint = await EventHubsAsyncHook(kw["event_hubs_conn_id"], kw["eventhub_name"]).get_endpoint()
        self.endpoint = endpoint
        namespace = kw.get("namespace")
        if namespace and namespace.lower() != endpoint.namespace:
            raise EventTriggerConfigError(
                f"queue names namespace {namespace!r} but connection {kw['event_hubs_conn_id']!r} reaches "
                f"{endpoint.fully_qualified_namespace!r}; use a connection to that namespace"
            )
        try:
            async with endpoint.async_producer(retry_total=1) as client:
                ids = [str(p) for p in (await client.get_eventhub_properties())["partition_ids"]]
                last = {}
                for pid in ids:
                    props = await client.get_partition_properties(pid)
                    last[pid] = -1 if props.get("is_empty") else int(props["last_enqueued_sequence_number"])
        except Exception as exc:
            message = (
                f"Event Hub {kw['eventhub_name']!r} on {endpoint.fully_qualified_namespace!r} cannot be read "
                f"({type(exc).__name__}: {exc}); check that the hub exists and connection {kw['event_hubs_conn_id']!r}"
            )
            if not_found(exc):
                raise EventTriggerConfigError(message) from exc
            raise ConnectionUnreachableError(kw["event_hubs_conn_id"], message) from exc
        wanted = [str(p) for p in kw["partition_ids"]] if kw.get("partition_ids") else ids
        check_partition_ids(kw["eventhub_name"], wanted, ids, EventTriggerConfigError)
        checkpoints: dict[str, int | None] = {}
        if kw.get("checkpoint_container"):
            await self._ensure_container()
            hook = CheckpointAsyncHook(
                container=kw["checkpoint_container"], event_hubs_conn_id=kw["event_hubs_conn_id"],
                wasb_conn_id=kw["wasb_conn_id"], eventhub_name=kw["eventhub_name"],
            )
            try:
                group = (await hook.read([kw["consumer_group"]]))[0]
            finally:
                await hook.close()
            checkpoints = {pid: group.sequence_number(pid) for pid in wanted}
        since = kw.get("start_enqueued_after")
        for pid in wanted:
            seq = (kw.get("start_after") or {}).get(pid, checkpoints.get(pid))
            if seq is None and kw["start_at"] == "latest" and since is not None:
                self.start[pid] = datetime.fromtimestamp(float(since), tz=UTC)
                self.read_to[pid] = -1
                continue
            if seq is None:
                seq = -1 if kw["start_at"] == "earliest" else last[pid]
            self.start[pid] = self.read_to[pid] = int(seq)
        return dict(self.start)

    def read_summary(self, since: Mapping[str, int] | None = None) -> str:
        """How far each partition was read: ``partition 0: from seq 4 to 9, ...`` (from ``since`` where given)."""
        return read_summary({**self.start, **(since or {})}, self.read_to)

    async def prepare(self) -> dict[str, int | datetime]:
        """Check the hub and its partitions and read the checkpoints; where each partition is read from."""
        if self._after is None:
            self._after = await self._prepare()
        return self._after

    async def open_stream(self) -> AsyncGenerator[tuple[Any, Any], None]:
        after = await self.prepare()
        kw = self.kw
        size, window = int(kw["batch_size"]), float(kw["batch_window"])
        async with PartitionStream(self.endpoint, kw["consumer_group"], after, max_batch_size=min(size, 300)) as stream:
            async for batch in gather_batches(stream.get, self.read_to, size, window):
                yield {"namespace": self.endpoint.namespace, "events": batch}, _positions(batch)

    def get_advance_lane(self, broker_payload: Any) -> Hashable:
        return None  # one lane: a batch spans partitions; checkpoints advance in fan-out order

    async def advance(self, batch: Sequence[Any]) -> None:
        """Checkpoint the resolved prefix; an event not confirmed stored ends the poll (it is read again)."""
        done: dict[str, tuple[int, str | None]] = {}
        for item in batch:
            outcome = item.outcome
            if outcome.failed or not (outcome.acked or outcome.rejected):
                await self.write_checkpoints(done)
                raise RuntimeError(
                    f"a batch of hub {self.kw['eventhub_name']!r} was not confirmed stored (acked {outcome.acked}, "
                    f"failed {outcome.failed}); reading again from the last checkpoint"
                )
            done.update(item.broker_payload)
        await self.write_checkpoints(done)

    async def write_checkpoints(self, positions: Mapping[str, tuple[int, str | None]]) -> None:
        """Write the standard checkpoint blobs of ``positions`` (``{partition: (sequence number, offset)}``)."""
        if not positions:
            return
        if not self.kw.get("checkpoint_container"):
            raise EventTriggerConfigError("checkpointing needs a checkpoint_container")
        await self._ensure_container()
        for pid, (seq, offset) in sorted(positions.items()):
            name = partition_blob(self.endpoint.fully_qualified_namespace, self.kw["eventhub_name"],
                                  self.kw["consumer_group"], CHECKPOINT, pid)
            await self._container.upload_blob(
                name, b"", overwrite=True, metadata={"sequencenumber": str(seq), "offset": str(offset or "")},
            )

    async def _ensure_container(self) -> None:
        """The checkpoint container's client; the container is created when missing."""
        if self._container is not None:
            return
        from azure.core.exceptions import ResourceExistsError

        self._blob = BlobStorageAsyncHook(self.kw["wasb_conn_id"])
        self._container = await self._blob.get_container_client(self.kw["checkpoint_container"])
        try:
            await self._container.create_container()
        except ResourceExistsError:
            pass

    async def aclose(self) -> None:
        if self._blob is not None:
            blob, self._blob, self._container = self._blob, None, None
            await blob.close()


async def gather_batches(
    get: Callable[[float], Any], read_to: dict[str, int], size: int, window: float,
    *, clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[list[dict[str, Any]]]:
    """
    Batches of event records from ``get(timeout)`` (``(partition, [EventData])`` or ``None`` when idle):
    a batch is handed over at ``size`` records or ``window`` seconds (by ``clock``) after its first
    record. ``read_to`` (partition -> last sequence number seen) is updated and drops what a reconnect
    delivers again.
    """
    pending: list[dict[str, Any]] = []
    started = 0.0
    while True:
        left = window if not pending else started + window - clock()
        item = await get(max(left, 0.0))
        if item is not None:
            pid, events = item
            fresh = [e for e in events if e.sequence_number > read_to.get(pid, -1)]
            if fresh and not pending:
                started = clock()
            for e in fresh:
                pending.append(event_record(e, pid))
                read_to[pid] = int(e.sequence_number)
        while pending and (len(pending) >= size or clock() - started >= window):
            batch, pending = pending[:size], pending[size:]
            started = clock()
            yield batch


def read_summary(start: Mapping[str, int | datetime], read_to: Mapping[str, int]) -> str:
    """
    ``partition 0: from seq 4 to 9, partition 1: from enqueued time <ISO time> to 3``: where each partition's
    reading began and the last sequence number read (-1: none); ``nothing (...)`` without partitions.
    """
    parts = []
    for pid in sorted(set(start) | set(read_to), key=lambda p: (len(p), p)):
        begin = start.get(pid)
        since = f"enqueued time {begin.isoformat()}" if isinstance(begin, datetime) else f"seq {'?' if begin is None else begin}"
        parts.append(f"partition {pid}: from {since} to {read_to.get(pid, '?')}")
    return ", ".join(parts) or "nothing (no partition opened)"


def _positions(batch: Sequence[dict[str, Any]]) -> dict[str, tuple[int, str | None]]:
    out: dict[str, tuple[int, str | None]] = {}
    for r in batch:
        out[r["partition"]] = (r["sequence_number"], r["offset"])
    return out


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
    :param filter: ``package.module.function`` called with each event record (:func:`event_record`);
        events it returns a falsy value for do not fire (they are checkpointed with their batch).
    :param batch_size: fire once per at most this many events.
    :param batch_window: fire at most this many seconds after a batch's first event.
    :param start_at: where a partition without a checkpoint starts: ``earliest`` or ``latest``.
    :param include_bodies: put the events' bodies into the payload when they fit ``max_body_bytes``.
    :param max_body_bytes: the bodies' total size limit.
    :param namespace: the namespace the connection must reach (set from a ``MessageQueueTrigger`` queue URI).
    """

    _container_optional = False

    def __init__(
        self,
        *,
        eventhub_name: str,
        consumer_group: str,
        checkpoint_container: str | None,
        event_hubs_conn_id: str = EventHubsAsyncHook.default_conn_name,
        wasb_conn_id: str = BlobStorageAsyncHook.default_conn_name,
        partition_ids: Sequence[str] | None = None,
        filter: str | None = None,
        batch_size: int = 100,
        batch_window: float = 10.0,
        start_at: str = "earliest",
        include_bodies: bool = False,
        max_body_bytes: int = 65536,
        namespace: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
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
        if float(batch_window) <= 0:
            raise EventTriggerConfigError(f"batch_window must be a positive number of seconds, not {batch_window}")
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
        self.batch_window = float(batch_window)
        self.start_at = start_at
        self.include_bodies = bool(include_bodies)
        self.max_body_bytes = int(max_body_bytes)
        self.namespace = namespace

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
                "batch_window": self.batch_window,
                "start_at": self.start_at,
                "include_bodies": self.include_bodies,
                "max_body_bytes": self.max_body_bytes,
                "namespace": self.namespace,
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


async def await_match(
    kwargs: Mapping[str, Any], keep: Callable[[dict[str, Any]], Any] | None, deadline: float | None,
    *, checkpoint: bool = False, since: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """
    Read until an event the filter keeps (any event without one) or ``deadline`` (POSIX time).

    The deadline applies once the hub was opened (a slow connection does not eat the wait).
    Returns ``{"status": "found", "event": record, "result": what the filter returned}`` or
    ``{"status": "timeout", "message": ..., "read_to": {partition: last sequence number read}}``; the
    message names the hub, the consumer group and how far each partition was read (from ``since``,
    ``{partition: sequence number}`` where an earlier read began, else from where this one began).
    With ``checkpoint`` the found event's partition is checkpointed at it (standard layout).
    """
    producer = EventHubBatchProducer(kwargs)
    stream = producer.open_stream()
    try:
        await producer.prepare()
        while True:
            left = None if deadline is None else deadline - time.time()
            if left is not None and left <= 0:
                break
            try:
                raw, _ = await asyncio.wait_for(anext(stream), timeout=left)
            except TimeoutError:
                break
            for record in raw["events"]:
                result = keep(record) if keep is not None else record
                if result:
                    if checkpoint:
                        await producer.write_checkpoints({record["partition"]: (record["sequence_number"], record["offset"])})
                    return {"status": "found", "event": record, "result": record if result is True else result}
        return {
            "status": "timeout",
            "message": f"no matching event in Event Hub {kwargs['eventhub_name']!r} (consumer group "
            f"{kwargs['consumer_group']!r}) before the deadline; read {producer.read_summary(since)}",
            "read_to": producer.read_to,
        }
    finally:
        await stream.aclose()
        await producer.aclose()


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
    "read_to"}`` or ``{"status": "error", "message", "retryable"}`` (``retryable`` false for the
    package's non-retryable errors, such as a consumer group the hub does not have).
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
            retryable = exc.retryable if isinstance(exc, EventHubsProviderError) else True
            result = {"status": "error", "message": f"{type(exc).__name__}: {exc}", "retryable": retryable}
        yield TriggerEvent(result)
