"""Consumer checkpoints of one hub, from an ``azure_event_hubs`` and a ``wasb`` connection.

A thin pairing of :class:`~airflow_provider_eh.hooks.event_hubs.EventHubHook` (partition ids and
last enqueued sequence numbers) with :class:`~airflow_provider_eh.hooks.blob.BlobStorageHook` and the
package's one checkpoint reader (:mod:`airflow_provider_eh.checkpoints.blob_layout`). One read costs one List
Blobs request per consumer group, and one Event Hubs partition-properties request per partition
asked about (the SDK opens a connection per management request), plus, on the first read only, one
hub-properties request whose partition ids are kept to check the targets.
``CheckpointHook`` is sync (sensor); ``CheckpointAsyncHook`` is its twin for the trigger.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from airflow_provider_eh.checkpoints.blob_layout import AsyncCheckpointReader, CheckpointReader, ConsumerGroupCheckpoints
from airflow_provider_eh.checkpoints.lag import CheckpointProgress, measure_progress
from airflow_provider_eh.client.partitions import check_partition_ids
from airflow_provider_eh.errors import EventHubsProviderError, UnknownPartitionError
from airflow_provider_eh.hooks.blob import BlobStorageAsyncHook, BlobStorageHook
from airflow_provider_eh.hooks.event_hubs import EventHubAsyncHook, EventHubHook

_TARGETS = "the sensor's targets or the hub name"  # what to fix when a target names a partition the hub lacks


def _last_enqueued(props: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    return {pid: int(p["last_enqueued_sequence_number"]) for pid, p in props.items()}


class _CheckpointHookBase:
    """Construction shared by the sync and async hooks: the two connections and the container."""

    _event_hubs_hook_class: type = EventHubHook
    _blob_hook_class: type = BlobStorageHook

    def __init__(
        self,
        *,
        container: str,
        event_hubs_conn_id: str = EventHubHook.default_conn_name,
        wasb_conn_id: str = BlobStorageHook.default_conn_name,
        eventhub_name: str | None = None,
    ):
        self.container = container
        self.event_hubs_hook = self._event_hubs_hook_class(event_hubs_conn_id, eventhub_name=eventhub_name)
        self.blob_hook = self._blob_hook_class(wasb_conn_id)
        self._partition_ids: list[str] | None = None

    def _unreachable(self, endpoint: Any, exc: Exception) -> EventHubsProviderError:
        """The error map's error for ``exc`` (:mod:`airflow_provider_eh.client.failures`), at the hub."""
        return self.event_hubs_hook.failure(endpoint, exc, "reading the partitions' properties")


class CheckpointHook(_CheckpointHookBase):
    """
    Consumer checkpoints and partition progress of one hub (sync).

    :param container: the container the consumers' ``BlobCheckpointStore`` writes to.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection of the hub.
    :param wasb_conn_id: the ``wasb`` connection of the checkpoint store's account.
    :param eventhub_name: the hub; default: the connection's.
    """

    event_hubs_hook: EventHubHook
    blob_hook: BlobStorageHook

    @cached_property
    def reader(self) -> CheckpointReader:
        endpoint = self.event_hubs_hook.get_endpoint()
        return CheckpointReader(
            self.blob_hook.get_container_client(self.container),
            endpoint.fully_qualified_namespace,
            endpoint.eventhub_name,
        )

    def read(self, consumer_groups: Iterable[str]) -> list[ConsumerGroupCheckpoints]:
        """Checkpoints and ownership per consumer group: one List Blobs request each."""
        return [self.reader.read(group) for group in consumer_groups]

    def partition_properties(self, partition_ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """
        Properties of ``partition_ids`` (default: every partition), one management request each.

        The hub's partition ids are read on the first call only and kept: a hub's partitions do not go away.

        :raises UnknownPartitionError: when the hub has no such partition.
        """
        endpoint = self.event_hubs_hook.get_endpoint()
        try:
            with endpoint.producer(retry_total=1) as client:
                if self._partition_ids is None:
                    self._partition_ids = list(client.get_eventhub_properties()["partition_ids"])
                wanted = self._partition_ids if partition_ids is None else [str(p) for p in partition_ids]
                check_partition_ids(endpoint.eventhub_name, wanted, self._partition_ids, fix=_TARGETS)
                return {pid: client.get_partition_properties(pid) for pid in wanted}
        except UnknownPartitionError:
            raise
        except Exception as exc:
            raise self._unreachable(endpoint, exc) from exc

    def last_enqueued(self, partition_ids: Iterable[str] | None = None) -> dict[str, int]:
        """Last enqueued sequence number per partition (``-1`` for a partition never written)."""
        return _last_enqueued(self.partition_properties(partition_ids))

    def progress(
        self, targets: Mapping[str, int], consumer_groups: Iterable[str], last_enqueued: Mapping[str, int] | None = None
    ) -> CheckpointProgress:
        """
        Where each consumer group stands on each target partition, and its lag to the last enqueued event.

        :param last_enqueued: already read last enqueued sequence numbers; read now when not given.
        """
        last = self.last_enqueued(targets) if last_enqueued is None else last_enqueued
        return measure_progress(targets, self.read(consumer_groups), last)


class CheckpointAsyncHook(_CheckpointHookBase):
    """
    Async twin of :class:`CheckpointHook`, for the trigger; ``close()`` releases its clients.

    :param container: the container the consumers' ``BlobCheckpointStore`` writes to.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection of the hub.
    :param wasb_conn_id: the ``wasb`` connection of the checkpoint store's account.
    :param eventhub_name: the hub; default: the connection's.
    """

    _event_hubs_hook_class = EventHubAsyncHook
    _blob_hook_class = BlobStorageAsyncHook
    event_hubs_hook: EventHubAsyncHook
    blob_hook: BlobStorageAsyncHook
    _reader: AsyncCheckpointReader | None = None

    async def get_reader(self) -> AsyncCheckpointReader:
        if self._reader is None:
            endpoint = await self.event_hubs_hook.get_endpoint()
            self._reader = AsyncCheckpointReader(
                await self.blob_hook.get_container_client(self.container),
                endpoint.fully_qualified_namespace,
                endpoint.eventhub_name,
            )
        return self._reader

    async def read(self, consumer_groups: Iterable[str]) -> list[ConsumerGroupCheckpoints]:
        reader = await self.get_reader()
        return [await reader.read(group) for group in consumer_groups]

    async def partition_properties(self, partition_ids: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        endpoint = await self.event_hubs_hook.get_endpoint()
        try:
            async with endpoint.async_producer(retry_total=1) as client:
                if self._partition_ids is None:
                    self._partition_ids = list((await client.get_eventhub_properties())["partition_ids"])
                wanted = self._partition_ids if partition_ids is None else [str(p) for p in partition_ids]
                check_partition_ids(endpoint.eventhub_name, wanted, self._partition_ids, fix=_TARGETS)
                return {pid: await client.get_partition_properties(pid) for pid in wanted}
        except UnknownPartitionError:
            raise
        except Exception as exc:
            raise self._unreachable(endpoint, exc) from exc

    async def progress(self, targets: Mapping[str, int], consumer_groups: Iterable[str]) -> CheckpointProgress:
        last = _last_enqueued(await self.partition_properties(targets))
        return measure_progress(targets, await self.read(consumer_groups), last)

    async def close(self) -> None:
        self._reader = None
        await self.blob_hook.close()
