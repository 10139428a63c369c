"""The broker side of the event trigger: a hub's partitions read from their checkpoints, in batches, checkpointed.

:class:`EventHubBatchProducer` checks the hub and the watched partitions, finds where each partition
is read from (a ``start_after`` entry, the consumer group's checkpoint in the standard blob layout,
else ``start_at``), reads them through
:class:`~airflow_provider_eh.triggers.partition_stream.PartitionStream` in batches
(:func:`~airflow_provider_eh.triggers.batches.gather_batches`), and writes the standard checkpoint
blobs (``<namespace>/<hub>/<group>/checkpoint/<partition>``, metadata ``sequencenumber`` and
``offset``) of what was handed over. In the triggerer's acknowledged shared-stream mode it is the
``SharedStreamProducer`` and checkpoints in :meth:`EventHubBatchProducer.advance`; the triggers'
``run()`` and :func:`~airflow_provider_eh.triggers.await_match.await_match` drive it directly.

Every failure of the hub or of the checkpoint container is raised as the package's error from the one
error map (:mod:`airflow_provider_eh.client.failures`): it names the connection, the address (and
proxy), the consumer group or container, the field to check and what already happened, and says
whether a retry can help.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.checkpoints.blob_layout import CHECKPOINT, partition_blob
from airflow_provider_eh.client.failures import FailureSite, provider_error, provider_errors, storage_failure
from airflow_provider_eh.client.partitions import check_partition_ids
from airflow_provider_eh.client.typed_events import AsyncTypedDecoder
from airflow_provider_eh.errors import ConnectionUnreachableError, EventTriggerConfigError
from airflow_provider_eh.hooks.blob import BlobStorageAsyncHook
from airflow_provider_eh.hooks.checkpoints import CheckpointAsyncHook
from airflow_provider_eh.hooks.event_hubs import EventHubAsyncHook
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryAsyncHook
from airflow_provider_eh.triggers.batches import gather_batches
from airflow_provider_eh.triggers.partition_stream import PartitionStream, not_found

try:  # Airflow 3.3+: acknowledged shared streams (persistence-gated checkpoints)
    from airflow.triggers.shared_stream import SharedStreamProducer
except ImportError:  # pragma: no cover - older Airflow: run() only
    SharedStreamProducer = object  # type: ignore[assignment,misc]

START_POSITIONS = ("earliest", "latest")

#: what already happened, for the error map's messages
NOTHING_READ = "Nothing was read and no checkpoint was written."
READING = "No checkpoint was written past the events already handed over: reading resumes after them."
CHECKPOINTING = "The events were handed over but their checkpoint was not written: they are read again when reading resumes."


@dataclass(frozen=True)
class HubReading:
    """
    What the producer reads and checkpoints, from a trigger's serialised kwargs (other kwargs are the
    trigger's own: the filter, the payload's bodies, the sensor's deadline).

    :param start_after: ``{partition: sequence number}`` to read after, before checkpoints and ``start_at``.
    :param start_enqueued_after: POSIX time: with ``start_at="latest"``, a partition without a
        ``start_after`` entry or a checkpoint is read from the events enqueued after it.
    :param schema_registry_conn_id: the connection whose namespace's Schema Registry decodes typed events
        (``None``: ``event_hubs_conn_id``'s); read when the first typed event arrives.
    """

    eventhub_name: str
    consumer_group: str
    checkpoint_container: str | None = None
    event_hubs_conn_id: str = EventHubAsyncHook.default_conn_name
    wasb_conn_id: str = BlobStorageAsyncHook.default_conn_name
    partition_ids: tuple[str, ...] | None = None
    batch_size: int = 100
    batch_seconds: float = 10.0
    start_at: str = "earliest"
    namespace: str | None = None
    start_after: Mapping[str, int] = field(default_factory=dict)
    start_enqueued_after: float | None = None
    schema_registry_conn_id: str | None = None

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any]) -> HubReading:
        """The reading a trigger's kwargs describe (``None`` stands for a field's default, as the trigger passes it)."""
        given = {f.name: kwargs[f.name] for f in fields(cls) if kwargs.get(f.name) is not None}
        if kwargs.get("batch_window") is not None:  # a trigger serialized before batch_seconds took its name
            given.setdefault("batch_seconds", kwargs["batch_window"])
        if "partition_ids" in given:
            given["partition_ids"] = tuple(str(p) for p in given["partition_ids"]) or None
        if "start_after" in given:
            given["start_after"] = {str(p): int(s) for p, s in given["start_after"].items()}
        return cls(**given)


class EventHubBatchProducer(SharedStreamProducer):
    """
    The broker side of the trigger: yields ``(batch, checkpoint positions)``; ``advance`` checkpoints.

    :param kwargs: the trigger's serialised kwargs (read as a :class:`HubReading`).
    """

    def __init__(self, kwargs: Mapping[str, Any]):
        self.reading = HubReading.from_kwargs(kwargs)
        self.start: dict[str, int | datetime] = {}  # partition -> read after this sequence number or enqueued time
        self.read_to: dict[str, int] = {}  # partition -> last sequence number received (-1: none)
        self.endpoint: Any = None
        self._blob: BlobStorageAsyncHook | None = None
        self._container: Any = None
        self._after: dict[str, int | datetime] | None = None
        registry = SchemaRegistryAsyncHook(self.reading.schema_registry_conn_id or self.reading.event_hubs_conn_id)
        # typed events' records are decoded before a batch is handed over
        self.decoder = AsyncTypedDecoder(registry.get_endpoint, conn_id=registry.event_hubs_conn_id)

    # -- reading ---------------------------------------------------------------------------

    async def _last_sequence_numbers(self) -> dict[str, int]:
        """Every partition's last enqueued sequence number (-1: empty), which also checks the hub and connection."""
        spec, endpoint = self.reading, self.endpoint
        try:
            async with endpoint.async_producer(retry_total=1) as client:
                ids = [str(p) for p in (await client.get_eventhub_properties())["partition_ids"]]
                last = {}
                for pid in ids:
                    props = await client.get_partition_properties(pid)
                    last[pid] = -1 if props.get("is_empty") else int(props["last_enqueued_sequence_number"])
                return last
        except Exception as exc:
            mapped = provider_error(exc, self.hub_site(NOTHING_READ))
            if mapped is not None:
                raise mapped from exc
            message = (
                f"Event Hub {spec.eventhub_name!r} on {endpoint.fully_qualified_namespace!r} cannot be read "
                f"({type(exc).__name__}: {exc}); check that the hub exists and connection {spec.event_hubs_conn_id!r}"
            )
            if not_found(exc):
                raise EventTriggerConfigError(message) from exc
            raise ConnectionUnreachableError(spec.event_hubs_conn_id, message) from exc

    def hub_site(self, done: str) -> FailureSite:
        """Where a failure on the hub happens, for the error map (no credential in it)."""
        spec = self.reading
        return FailureSite.of_endpoint(spec.event_hubs_conn_id, self.endpoint, consumer_group=spec.consumer_group,
                                       done=done)

    def blob_site(self, done: str) -> FailureSite:
        """Where a failure on the checkpoint container happens, for the error map (no credential in it)."""
        spec = self.reading
        return FailureSite.of_blob(spec.wasb_conn_id, getattr(self._container, "url", None),
                                   container=spec.checkpoint_container, container_field="checkpoint_container",
                                   role="checkpoints", done=done)

    async def _checkpoints(self, wanted: Sequence[str]) -> dict[str, int | None]:
        """The consumer group's checkpointed sequence numbers of ``wanted`` (none without a checkpoint container)."""
        spec = self.reading
        if not spec.checkpoint_container:
            return {}
        await self._ensure_container(NOTHING_READ)
        hook = CheckpointAsyncHook(
            container=spec.checkpoint_container, event_hubs_conn_id=spec.event_hubs_conn_id,
            wasb_conn_id=spec.wasb_conn_id, eventhub_name=spec.eventhub_name,
        )
        try:
            group = (await hook.read([spec.consumer_group]))[0]
        except Exception as exc:
            failure = storage_failure(exc, self.blob_site(NOTHING_READ))
            if failure is exc:
                raise
            raise failure from exc
        finally:
            await hook.close()
        return {pid: group.sequence_number(pid) for pid in wanted}

    async def _prepare(self) -> dict[str, int | datetime]:
        spec = self.reading
        self.endpoint = await EventHubAsyncHook(spec.event_hubs_conn_id, spec.eventhub_name).get_endpoint()
        if spec.namespace and spec.namespace.lower() != self.endpoint.namespace:
            raise EventTriggerConfigError(
                f"queue names namespace {spec.namespace!r} but connection {spec.event_hubs_conn_id!r} reaches "
                f"{self.endpoint.fully_qualified_namespace!r}; use a connection to that namespace"
            )
        last = await self._last_sequence_numbers()
        ids = list(last)
        wanted = list(spec.partition_ids) if spec.partition_ids else ids
        check_partition_ids(spec.eventhub_name, wanted, ids, EventTriggerConfigError)
        checkpoints = await self._checkpoints(wanted)
        for pid in wanted:
            seq = spec.start_after.get(pid, checkpoints.get(pid))
            if seq is None and spec.start_at == "latest" and spec.start_enqueued_after is not None:
                self.start[pid] = datetime.fromtimestamp(float(spec.start_enqueued_after), tz=UTC)
                self.read_to[pid] = -1
                continue
            if seq is None:
                seq = -1 if spec.start_at == "earliest" else last[pid]
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
        spec = self.reading
        size, window = int(spec.batch_size), float(spec.batch_seconds)
        async with PartitionStream(self.endpoint, spec.consumer_group, after, max_batch_size=min(size, 300),
                                   site=self.hub_site(READING)) as stream:
            async for batch in gather_batches(stream.get, self.read_to, size, window, decoder=self.decoder):
                yield {"namespace": self.endpoint.namespace, "events": batch}, positions_of(batch)

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
                    f"a batch of hub {self.reading.eventhub_name!r} was not confirmed stored (acked {outcome.acked}, "
                    f"failed {outcome.failed}); reading again from the last checkpoint"
                )
            done.update(item.broker_payload)
        await self.write_checkpoints(done)

    # -- checkpointing ---------------------------------------------------------------------

    async def write_checkpoints(self, positions: Mapping[str, tuple[int, str | None]]) -> None:
        """Write the standard checkpoint blobs of ``positions`` (``{partition: (sequence number, offset)}``)."""
        if not positions:
            return
        spec = self.reading
        if not spec.checkpoint_container:
            raise EventTriggerConfigError("checkpointing needs a checkpoint_container")
        await self._ensure_container(CHECKPOINTING)
        with provider_errors(self.blob_site(CHECKPOINTING)):
            for pid, (seq, offset) in sorted(positions.items()):
                name = partition_blob(self.endpoint.fully_qualified_namespace, spec.eventhub_name,
                                      spec.consumer_group, CHECKPOINT, pid)
                await self._container.upload_blob(
                    name, b"", overwrite=True, metadata={"sequencenumber": str(seq), "offset": str(offset or "")},
                )

    async def _ensure_container(self, done: str) -> None:
        """The checkpoint container's client; the container is created when missing."""
        if self._container is not None:
            return
        from azure.core.exceptions import ResourceExistsError

        self._blob = BlobStorageAsyncHook(self.reading.wasb_conn_id)
        container = await self._blob.get_container_client(str(self.reading.checkpoint_container))
        self._container = container
        try:
            with provider_errors(self.blob_site(done)):
                try:
                    await container.create_container()
                except ResourceExistsError:
                    pass
        except Exception:
            self._container = None  # created on the next call, once the cause is fixed
            raise

    async def aclose(self) -> None:
        await self.decoder.close()
        if self._blob is not None:
            blob, self._blob, self._container = self._blob, None, None
            await blob.close()


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


def positions_of(batch: Sequence[dict[str, Any]]) -> dict[str, tuple[int, str | None]]:
    """The checkpoint positions of a batch of event records: each partition's last ``(sequence number, offset)``."""
    out: dict[str, tuple[int, str | None]] = {}
    for r in batch:
        out[r["partition"]] = (r["sequence_number"], r["offset"])
    return out
