"""Wait, without a worker slot, until consumer groups have checkpointed past target sequence numbers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_eh import metrics
from airflow_provider_eh.client.failures import SENSOR_ONLY_READS, FailureSite, storage_failure
from airflow_provider_eh.hooks.blob import BlobStorageAsyncHook
from airflow_provider_eh.hooks.checkpoints import CheckpointAsyncHook
from airflow_provider_eh.hooks.event_hubs import EventHubAsyncHook
from airflow_provider_eh.triggers.reported import error_event


class EventHubCheckpointTrigger(BaseTrigger):
    """
    Poll the consumer groups' checkpoints until each target partition's checkpoint reaches its target.

    Each poll lists the checkpoint blobs once per consumer group with the async blob client and reads
    the target partitions' last enqueued sequence numbers for the lag. It yields one event:
    ``{"status": "success" | "timeout" | "error", "message": ..., "progress": ...}`` where
    ``progress`` is :meth:`CheckpointProgress.to_dict` of the last poll (absent on error); an error
    event (:func:`~airflow_provider_eh.triggers.reported.error_event`) also says whether a retry can
    help (``retryable``: false for the package's non-retryable errors) and the error's class, so the
    sensor raises it as it raises the same error in a poke. A failure of the checkpoint container is
    the error map's (:mod:`airflow_provider_eh.client.failures`), naming the connection, the account's
    address and the container.
    Reading has no side effects, so the trigger may run twice. Each poll sets the lag per consumer group
    and partition (``eventhubs.checkpoint.lag``, :mod:`airflow_provider_eh.metrics`).

    :param targets: ``{partition id: sequence number}`` to reach.
    :param consumer_groups: the consumer groups that must all reach the targets.
    :param container: the container the consumers' ``BlobCheckpointStore`` writes to.
    :param eventhub_name: the hub; default: the connection's.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection.
    :param wasb_conn_id: the ``wasb`` connection of the checkpoint store.
    :param poll_interval: seconds between polls.
    :param deadline: POSIX time after which the trigger reports a timeout with the lag; ``None``: never.
    """

    def __init__(
        self,
        *,
        targets: dict[str, int],
        consumer_groups: Sequence[str],
        container: str,
        eventhub_name: str | None = None,
        event_hubs_conn_id: str = EventHubAsyncHook.default_conn_name,
        wasb_conn_id: str = BlobStorageAsyncHook.default_conn_name,
        poll_interval: float = 60.0,
        deadline: float | None = None,
    ):
        super().__init__()
        self.targets = {str(p): int(s) for p, s in targets.items()}
        self.consumer_groups = list(consumer_groups)
        self.container = container
        self.eventhub_name = eventhub_name
        self.event_hubs_conn_id = event_hubs_conn_id
        self.wasb_conn_id = wasb_conn_id
        self.poll_interval = float(poll_interval)
        self.deadline = deadline
        self._hook: CheckpointAsyncHook | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "targets": self.targets,
                "consumer_groups": self.consumer_groups,
                "container": self.container,
                "eventhub_name": self.eventhub_name,
                "event_hubs_conn_id": self.event_hubs_conn_id,
                "wasb_conn_id": self.wasb_conn_id,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # Clients are closed before the event is yielded: a test harness may never call cleanup().
        yield await self._wait()

    async def _wait(self) -> TriggerEvent:
        self._hook = CheckpointAsyncHook(
            container=self.container,
            event_hubs_conn_id=self.event_hubs_conn_id,
            wasb_conn_id=self.wasb_conn_id,
            eventhub_name=self.eventhub_name,
        )
        try:
            while True:
                try:
                    progress = await self._hook.progress(self.targets, self.consumer_groups)
                except Exception as exc:
                    self.log.exception("Reading checkpoints of consumer groups %s failed", self.consumer_groups)
                    return TriggerEvent(error_event(await self._mapped(exc)))
                metrics.checkpoint_lags(progress)
                self.log.info(
                    "Checkpoints of hub %r in container %r: %s",
                    progress.eventhub_name, self.container, progress.summary(),
                )
                if progress.reached:
                    return TriggerEvent(
                        {"status": "success", "message": progress.summary(), "progress": progress.to_dict()}
                    )
                now = time.time()
                if self.deadline is not None and now >= self.deadline:
                    return TriggerEvent(
                        {
                            "status": "timeout",
                            "message": f"Consumer groups did not reach the targets in time: {progress.summary()}",
                            "progress": progress.to_dict(),
                        }
                    )
                pause = self.poll_interval if self.deadline is None else min(self.poll_interval, self.deadline - now)
                await asyncio.sleep(max(pause, 0.0))
        finally:
            await self.cleanup()

    async def _mapped(self, exc: Exception) -> BaseException:
        """The package's error for a failure of the checkpoint container (the hook maps the hub's itself)."""
        if self._hook is None:
            return exc
        try:
            account_url = (await self._hook.blob_hook.get_service_client()).url
        except Exception:  # the client cannot even be built: the error says why
            return exc
        site = FailureSite.of_blob(self.wasb_conn_id, account_url, container=self.container, container_field="container",
                                   role="checkpoints", done=SENSOR_ONLY_READS)
        return storage_failure(exc, site)

    async def cleanup(self) -> None:
        """Close the blob client (the Event Hubs client is closed after every poll)."""
        if self._hook is not None:
            hook, self._hook = self._hook, None
            await hook.close()
