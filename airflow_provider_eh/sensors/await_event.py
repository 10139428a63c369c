"""Wait in a DAG for one event in an Event Hub that matches a filter (the Kafka provider's ``AwaitMessageSensor``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowSensorTimeout
from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.hooks.checkpoints import CheckpointHook
from airflow_provider_eh.hooks.event_hubs import EventHubsHook
from airflow_provider_eh.triggers.event import EventHubAwaitEventTrigger, EventTriggerConfigError, await_match, load_filter

if TYPE_CHECKING:
    from airflow.sdk import Context


MIN_POKE_READ = 5.0  # seconds a poke reads at least: opening the partitions' links takes a few


class EventHubAwaitEventSensor(BaseSensorOperator):
    """
    Wait until an event matching ``filter`` arrives; return it (or what the filter returned) through XCom.

    Reading starts at the consumer group's checkpoints in ``checkpoint_container`` (the standard blob
    layout) and, for partitions without one or without a container, at ``start_at`` (default ``latest``:
    events enqueued after the sensor started). With ``checkpoint`` the found event's partition is
    checkpointed at it, so the next wait of the same group starts after it.

    Deferrable by default: the wait runs in the triggerer
    (:class:`~airflow_provider_eh.triggers.event.EventHubAwaitEventTrigger`). With ``deferrable=False``
    each poke reads for ``max(poke_interval, 5)`` seconds in the worker (no triggerer needed) and the
    next poke continues where it stopped. On timeout
    the task fails with a message naming the hub, the consumer group and how far each partition was read.

    :param eventhub_name: the hub. (templated)
    :param consumer_group: the consumer group to read as. (templated)
    :param filter: ``package.module.function`` called with each event record (dict with ``partition``,
        ``sequence_number``, ``offset``, ``enqueued_time``, ``properties``, ``body``); a truthy result
        matches and is returned (``True``: the record). ``None``: the first event matches. (templated)
    :param checkpoint_container: the container of the group's checkpoints (needed for ``checkpoint``). (templated)
    :param checkpoint: checkpoint the found event.
    :param partition_ids: only these partitions. (templated)
    :param start_at: ``latest`` or ``earliest``, for partitions without a checkpoint.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection.
    :param wasb_conn_id: the ``wasb`` connection of ``checkpoint_container``.
    :param deferrable: wait in the triggerer.
    """

    template_fields: Sequence[str] = ("eventhub_name", "consumer_group", "filter", "checkpoint_container", "partition_ids")
    ui_color = "#e7f0fb"

    def __init__(
        self,
        *,
        eventhub_name: str,
        consumer_group: str = "$Default",
        filter: str | None = None,
        checkpoint_container: str | None = None,
        checkpoint: bool = False,
        partition_ids: Sequence[str] | None = None,
        start_at: str = "latest",
        event_hubs_conn_id: str = EventHubsHook.default_conn_name,
        wasb_conn_id: str = BlobStorageHook.default_conn_name,
        deferrable: bool = True,
        **kwargs: Any,
    ):
        kwargs.setdefault("poke_interval", 5.0)
        super().__init__(**kwargs)
        self.eventhub_name = eventhub_name
        self.consumer_group = consumer_group
        self.filter = filter
        self.checkpoint_container = checkpoint_container
        self.checkpoint = checkpoint
        self.partition_ids = partition_ids
        self.start_at = start_at
        self.event_hubs_conn_id = event_hubs_conn_id
        self.wasb_conn_id = wasb_conn_id
        self.deferrable = deferrable
        self._positions: dict[str, int] | None = None

    def _trigger(self, deadline: float | None) -> EventHubAwaitEventTrigger:
        return EventHubAwaitEventTrigger(
            eventhub_name=self.eventhub_name, consumer_group=self.consumer_group, filter=self.filter,
            checkpoint_container=self.checkpoint_container, checkpoint=self.checkpoint,
            partition_ids=self.partition_ids, start_at=self.start_at, event_hubs_conn_id=self.event_hubs_conn_id,
            wasb_conn_id=self.wasb_conn_id, deadline=deadline, start_after=self._positions,
            batch_size=300, batch_window=0.1,  # look at each event as soon as it arrives
        )

    def _start_positions(self) -> dict[str, int]:
        """Where each partition is read from, fixed when the task starts: checkpoint, else ``start_at``."""
        hook = EventHubsHook(self.event_hubs_conn_id, self.eventhub_name)
        ids = hook.get_partition_ids()
        wanted = [str(p) for p in self.partition_ids] if self.partition_ids else ids
        unknown = sorted(set(wanted) - set(ids))
        if unknown:
            raise EventTriggerConfigError(
                f"Event Hub {self.eventhub_name!r} has no partition {', '.join(unknown)} (it has {', '.join(ids)}); "
                "fix partition_ids"
            )
        checkpoints: dict[str, int | None] = {}
        if self.checkpoint_container:
            (group,) = CheckpointHook(
                container=self.checkpoint_container, event_hubs_conn_id=self.event_hubs_conn_id,
                wasb_conn_id=self.wasb_conn_id, eventhub_name=self.eventhub_name,
            ).read([self.consumer_group])
            checkpoints = {p: group.sequence_number(p) for p in wanted}
        positions = {}
        for p in wanted:
            seq = checkpoints.get(p)
            if seq is None:
                props = hook.get_partition_properties(p)
                latest = -1 if props.get("is_empty") else int(props["last_enqueued_sequence_number"])
                seq = latest if self.start_at == "latest" else -1
            positions[p] = seq
        return positions

    def _deadline(self) -> float | None:
        if self.timeout is None:
            return None
        seconds = self.timeout.total_seconds() if hasattr(self.timeout, "total_seconds") else float(self.timeout)
        return self._started + seconds

    def execute(self, context: Context) -> Any:
        self._started = time.time()
        self._trigger(None)  # validates the arguments (filter, start_at) before touching the hub
        self._positions = self._start_positions()
        trigger = self._trigger(self._deadline())
        if self.deferrable:
            self.defer(trigger=trigger, method_name="execute_complete")
        return super().execute(context)

    def poke(self, context: Context) -> PokeReturnValue | bool:
        _, kwargs = self._trigger(None).serialize()  # start_after: where the task started, or what earlier pokes read
        window = time.time() + max(float(self.poke_interval), MIN_POKE_READ)
        deadline = self._deadline()
        result = asyncio.run(await_match(
            kwargs, load_filter(self.filter), window if deadline is None else min(window, deadline),
            checkpoint=self.checkpoint,
        ))
        if result["status"] == "found":
            return PokeReturnValue(is_done=True, xcom_value=result["result"])
        self._positions = {p: s for p, s in result["read_to"].items()}
        self._last_message = result["message"]
        if deadline is not None and time.time() >= deadline:
            raise AirflowSensorTimeout(f"Task {self.task_id!r} timed out: {result['message']}")
        return False

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        if event["status"] == "found":
            self.log.info("Found event partition %s seq %s", event["event"]["partition"], event["event"]["sequence_number"])
            return event["result"]
        if event["status"] == "timeout":
            raise AirflowSensorTimeout(f"Task {self.task_id!r} timed out: {event['message']}")
        raise RuntimeError(f"Task {self.task_id!r}: waiting for an event failed: {event['message']}")
