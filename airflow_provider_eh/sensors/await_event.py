"""Wait in a DAG for one event in an Event Hub that matches a filter (the Kafka provider's ``AwaitMessageSensor``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowSensorTimeout
from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_provider_eh.client.partitions import check_partition_ids
from airflow_provider_eh.errors import EventTriggerConfigError
from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.hooks.checkpoints import CheckpointHook
from airflow_provider_eh.hooks.event_hubs import EventHubHook
from airflow_provider_eh.operators.task_errors import airflow_errors
from airflow_provider_eh.triggers.await_match import await_match
from airflow_provider_eh.triggers.event import EventHubAwaitEventTrigger
from airflow_provider_eh.triggers.filters import load_filter
from airflow_provider_eh.triggers.reported import task_error

if TYPE_CHECKING:
    from airflow.sdk import Context


# Seconds a poke reads at least: opening the partitions' links takes a few, and the SDK reports a
# refused link (a consumer group the hub does not have) only after its retries, about 5 s.
MIN_POKE_READ = 10.0


class EventHubAwaitEventSensor(BaseSensorOperator):
    """
    Wait until an event matching ``filter`` arrives; return it (or what the filter returned) through XCom.

    Reading starts at the consumer group's checkpoints in ``checkpoint_container`` (the standard blob
    layout) and, for partitions without one or without a container, at ``start_at``: ``earliest``, or
    ``latest`` (the default): the events enqueued after the task first started. With ``checkpoint`` the
    found event's partition is checkpointed at it, so the next wait of the same group starts after it.

    Deferrable by default: the wait runs in the triggerer
    (:class:`~airflow_provider_eh.triggers.event.EventHubAwaitEventTrigger`). With ``deferrable=False``
    each poke reads for ``max(poke_interval, 10)`` seconds in the worker (no triggerer needed). In
    ``poke`` mode the next poke continues where the last one stopped. In ``reschedule`` mode each poke
    is a new process and reads again from the start positions; there ``latest`` means the events
    enqueued after the first poke, whose time Airflow records (compared with the service's enqueued
    times: keep Airflow's clock synchronised), so events enqueued between pokes are not skipped, and
    that first poke reads nothing. On timeout the task fails with a message naming the hub, the
    consumer group and how far each partition was read. A consumer group, hub or partition that does
    not exist, or an unimportable filter, fails the task without retries.

    :param eventhub_name: the hub. (templated)
    :param consumer_group: the consumer group to read as. (templated)
    :param filter: ``package.module.function`` called with each event record (dict with ``partition``,
        ``sequence_number``, ``offset``, ``enqueued_time``, ``properties``, ``body``); a truthy result
        matches and is returned (``True``: the record). ``None``: the first event matches. A typed event's
        ``body`` is its decoded value (a dict) and its record has ``schema_id``. (templated)
    :param checkpoint_container: the container of the group's checkpoints (needed for ``checkpoint``). (templated)
    :param checkpoint: checkpoint the found event.
    :param partition_ids: only these partitions. (templated)
    :param start_at: ``latest`` or ``earliest``, for partitions without a checkpoint.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection.
    :param wasb_conn_id: the ``wasb`` connection of ``checkpoint_container``.
    :param schema_registry_conn_id: the connection whose namespace's Schema Registry decodes typed events (default:
        ``event_hubs_conn_id``'s); a record that does not decode has ``decode_error`` instead. (templated)
    :param deferrable: wait in the triggerer.
    """

    template_fields: Sequence[str] = ("eventhub_name", "consumer_group", "filter", "checkpoint_container", "partition_ids",
                                      "schema_registry_conn_id")
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
        event_hubs_conn_id: str = EventHubHook.default_conn_name,
        wasb_conn_id: str = BlobStorageHook.default_conn_name,
        schema_registry_conn_id: str | None = None,
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
        self.schema_registry_conn_id = schema_registry_conn_id
        self.deferrable = deferrable
        self._started: float | None = None  # POSIX time the task started (for the timeout)
        self._since: float | None = None  # reschedule mode: read latest partitions from events enqueued after this
        self._first_positions: dict[str, int] = {}  # where reading began (sequence numbers), for the timeout message
        self._positions: dict[str, int] = {}  # where the next read begins: the start, then what earlier pokes read
        self._wanted: list[str] = []  # the partitions read

    def _trigger(self, deadline: float | None) -> EventHubAwaitEventTrigger:
        return EventHubAwaitEventTrigger(
            eventhub_name=self.eventhub_name, consumer_group=self.consumer_group, filter=self.filter,
            checkpoint_container=self.checkpoint_container, checkpoint=self.checkpoint,
            partition_ids=self.partition_ids, start_at=self.start_at, event_hubs_conn_id=self.event_hubs_conn_id,
            wasb_conn_id=self.wasb_conn_id, schema_registry_conn_id=self.schema_registry_conn_id, deadline=deadline,
            start_after=self._positions,
            start_enqueued_after=self._since,
            batch_size=300, batch_seconds=0.1,  # look at each event as soon as it arrives
        )

    def _first_start(self, context: Context) -> None:
        """
        Fix when the task started. In reschedule mode every poke is a new process: the start is the time
        Airflow recorded the first reschedule, and ``latest`` reads from the events enqueued after it.
        """
        first = context["ti"].get_first_reschedule_date(context) if self.reschedule else None
        self._started = time.time() if first is None else first.timestamp()
        self._since = None if first is None else first.timestamp()

    def _start_positions(self) -> dict[str, int]:
        """
        Where each partition is read from, fixed when the task starts: its checkpoint, else ``start_at``.

        In reschedule mode a ``latest`` partition without a checkpoint is left out: it is read from the
        events enqueued after the first poke (``start_enqueued_after``), a time every poke finds again.
        """
        hook = EventHubHook(self.event_hubs_conn_id, self.eventhub_name)
        ids = hook.get_partition_ids()  # a hub that does not exist: the error map's UnknownEventHubError, not retried
        wanted = [str(p) for p in self.partition_ids] if self.partition_ids else ids
        check_partition_ids(self.eventhub_name, wanted, ids, EventTriggerConfigError)
        checkpoints: dict[str, int | None] = {}
        if self.checkpoint_container:
            (group,) = CheckpointHook(
                container=self.checkpoint_container, event_hubs_conn_id=self.event_hubs_conn_id,
                wasb_conn_id=self.wasb_conn_id, eventhub_name=self.eventhub_name,
            ).read([self.consumer_group])
            checkpoints = {p: group.sequence_number(p) for p in wanted}
        self._wanted = wanted
        positions = {}
        for p in wanted:
            seq = checkpoints.get(p)
            if seq is None and self.start_at == "earliest":
                seq = -1
            elif seq is None and self.reschedule:
                continue
            elif seq is None:
                props = hook.get_partition_properties(p)
                seq = -1 if props.get("is_empty") else int(props["last_enqueued_sequence_number"])
            positions[p] = seq
        return positions

    def _deadline(self) -> float | None:
        if self.timeout is None or self._started is None:
            return None
        seconds = self.timeout.total_seconds() if hasattr(self.timeout, "total_seconds") else float(self.timeout)
        return self._started + seconds

    def execute(self, context: Context) -> Any:
        with airflow_errors(self.task_id):
            self._first_start(context)
            self._trigger(None)  # validates the arguments (filter, start_at) before touching the hub
            self._positions = self._start_positions()
            self._first_positions = dict(self._positions)
            trigger = self._trigger(self._deadline())
        if self.deferrable:
            self.defer(trigger=trigger, method_name="execute_complete")
        return super().execute(context)

    def poke(self, context: Context) -> PokeReturnValue | bool:
        if self.reschedule and self._since is None and set(self._wanted) - set(self._positions):
            # Reading "latest" in reschedule mode needs a start every poke finds again: the time Airflow
            # records for this first reschedule. Reading starts with the next poke, at that time.
            self.log.info("First poke: the next pokes read the events enqueued in hub %r after this one", self.eventhub_name)
            return False
        deadline = self._deadline()
        window = time.time() + max(float(self.poke_interval), MIN_POKE_READ)
        with airflow_errors(self.task_id):
            _, kwargs = self._trigger(None).serialize()  # start_after: where the task started, or what earlier pokes read
            result = asyncio.run(await_match(
                kwargs, load_filter(self.filter), window if deadline is None else min(window, deadline),
                checkpoint=self.checkpoint, since=self._first_positions,
            ))
        if result["status"] == "found":
            return PokeReturnValue(is_done=True, xcom_value=result["result"])
        if not self.reschedule:  # the next poke continues after what this one read (reschedule: a new process)
            self._positions = dict(result["read_to"])
        if deadline is not None and time.time() >= deadline:
            raise AirflowSensorTimeout(f"Task {self.task_id!r} timed out after {self.timeout} s: {result['message']}")
        self.log.info("No matching event in this poke: %s", result["message"])
        return False

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Return what the filter returned for the found event; raise on a timeout, an error or a missing event."""
        if not event:
            raise AirflowException(f"Task {self.task_id!r}: the await-event trigger ended without an event")
        status = event.get("status")
        if status == "found":
            self.log.info("Found event partition %s seq %s", event["event"]["partition"], event["event"]["sequence_number"])
            return event["result"]
        if status == "timeout":
            raise AirflowSensorTimeout(f"Task {self.task_id!r} timed out: {event.get('message')}")
        # the rule of operators.task_errors: no retries for what cannot change; the error's class is kept
        raise task_error(
            self.task_id, f"waiting for an event in Event Hub {self.eventhub_name!r} (consumer group {self.consumer_group!r})",
            event,
        )
