"""Wait until downstream consumer groups have checkpointed past what was published.

The sensor's own vocabulary lives here: :func:`parse_targets` turns what a DAG passes (plain
targets, the publish task's XCom, a rendered template) into ``{partition: sequence number}``; the
checkpoints are read by :mod:`airflow_provider_eh.checkpoints.blob_layout` and compared by
:mod:`airflow_provider_eh.checkpoints.lag`.
"""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, AirflowSensorTimeout, conf
from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_provider_eh import metrics
from airflow_provider_eh.checkpoints.lag import CheckpointProgress
from airflow_provider_eh.client.failures import SENSOR_ONLY_READS, storage_failure
from airflow_provider_eh.deprecation import renamed_argument
from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.hooks.checkpoints import CheckpointHook
from airflow_provider_eh.hooks.event_hubs import EventHubHook
from airflow_provider_eh.operators.task_errors import airflow_errors
from airflow_provider_eh.triggers.checkpoint import EventHubCheckpointTrigger
from airflow_provider_eh.triggers.reported import task_error

if TYPE_CHECKING:
    from airflow.sdk import Context


def _whole_number(raw: Any) -> int | None:
    try:
        return int(str(raw).strip())
    except (TypeError, ValueError):
        return None


def parse_targets(value: Any) -> dict[str, int] | None:
    """
    Normalise sequence-number targets to ``{partition id: sequence number}``.

    Accepts ``{partition: int}``; the publish operator's XCom ``{partition: {events, first_seq,
    last_seq, service_last_sequence_number}}`` (``service_last_sequence_number`` is waited on, else
    ``last_seq``); a list of either (mapped publish tasks; the highest target per partition wins);
    or any of these as JSON or Python-literal text (a rendered template). ``None`` (or empty text)
    means "no targets given". Partitions without a sequence number (nothing published) are dropped.
    """
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        text = value.decode() if isinstance(value, bytes) else value
        if not text.strip() or text.strip() == "None":
            return None
        try:
            value = json.loads(text)
        except ValueError:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise ValueError(
                    f"targets {text[:200]!r} are neither JSON nor a Python literal; "
                    "pass {partition: sequence number} or the publish task's output"
                ) from None
        return parse_targets(value)
    if isinstance(value, Mapping):
        targets: dict[str, int] = {}
        for partition, target in value.items():
            if isinstance(target, Mapping):
                target = next(
                    (target[k] for k in ("service_last_sequence_number", "last_seq") if target.get(k) is not None),
                    None,
                )
            if target is None:
                continue
            if isinstance(target, bool) or not isinstance(target, (int, str)) or _whole_number(target) is None:
                raise ValueError(f"target of partition {partition!r} is {target!r}; expected a sequence number")
            targets[str(partition)] = _whole_number(target)  # type: ignore[assignment]
        return targets
    if isinstance(value, Sequence):
        merged: dict[str, int] = {}
        for item in value:
            for partition, target in (parse_targets(item) or {}).items():
                merged[partition] = max(target, merged.get(partition, target))
        return merged
    raise ValueError(f"targets of type {type(value).__name__} are not understood; pass {{partition: sequence number}}")


class EventHubCheckpointSensor(BaseSensorOperator):
    """
    Wait until every consumer group's checkpoint on every target partition reaches its target.

    Checkpoints are read from the standard ``BlobCheckpointStore`` layout that every Azure SDK's
    event processor writes; only sequence numbers are compared (a checkpoint holds the sequence
    number of the last event processed, so a target is reached when ``checkpoint >= target``).
    Each poke costs one List Blobs request per consumer group, and one Event Hubs
    partition-properties request per target partition for the lag in the log line and the timeout
    message (the first poke also reads the hub's partition ids, once).

    With ``deferrable=True`` the sensor pokes once and, if the targets are not reached, hands the
    wait to :class:`~airflow_provider_eh.triggers.checkpoint.EventHubCheckpointTrigger`, which polls
    with the async blob client in the triggerer and holds no worker slot. ``timeout`` is enforced by
    the trigger itself, so a timeout fails with the lag per partition in every mode.

    Returns (XCom) ``{consumer group: {partition: checkpointed sequence number}}``.

    :param checkpoint_container: the container the consumers' ``BlobCheckpointStore`` writes to. (templated)
    :param consumer_groups: one consumer group or several; all must reach the targets. (templated)
    :param targets: ``{partition: sequence number}``, or the publish operator's output
        ``{partition: {events, first_seq, last_seq, service_last_sequence_number}}`` (its
        ``service_last_sequence_number`` is waited on; partitions without events are skipped), or a
        list of such outputs (mapped publish tasks). ``None``: every partition's last enqueued
        sequence number when the sensor starts, that is, everything enqueued so far; not available
        in ``reschedule`` mode, which keeps no state between pokes. (templated)
    :param eventhub_name: the hub; default: the Event Hubs connection's. (templated)
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection. (templated)
    :param wasb_conn_id: the ``wasb`` connection of the checkpoint store's account. (templated)
    :param deferrable: wait in the triggerer instead of a worker slot.
    :param container: deprecated spelling of ``checkpoint_container`` (removed in 2.0.0).
    """

    template_fields: Sequence[str] = (
        "checkpoint_container",
        "consumer_groups",
        "targets",
        "eventhub_name",
        "event_hubs_conn_id",
        "wasb_conn_id",
    )
    ui_color = "#d7ecf9"

    def __init__(
        self,
        *,
        checkpoint_container: str | None = None,
        consumer_groups: str | Sequence[str] = "$Default",
        targets: Any = None,
        eventhub_name: str | None = None,
        event_hubs_conn_id: str = EventHubHook.default_conn_name,
        wasb_conn_id: str = BlobStorageHook.default_conn_name,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        container: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        checkpoint_container = renamed_argument(
            self.task_id, "checkpoint_container", checkpoint_container, "container", container,
            old_as="EventHubCheckpointSensor(container=...)", why="=..., as every other class of the provider names it")
        if not checkpoint_container:
            raise ValueError(f"Task {self.task_id!r}: pass checkpoint_container, the container the consumers' "
                             "BlobCheckpointStore writes to")
        self.checkpoint_container = checkpoint_container
        self.consumer_groups = consumer_groups
        self.targets = targets
        self.eventhub_name = eventhub_name
        self.event_hubs_conn_id = event_hubs_conn_id
        self.wasb_conn_id = wasb_conn_id
        self.deferrable = deferrable
        if targets is None and self.reschedule and not deferrable:
            raise ValueError(
                f"Task {self.task_id!r}: targets=None (wait for everything enqueued when the sensor starts) "
                "needs state between pokes; pass targets, or use mode='poke' or deferrable=True"
            )
        self._resolved_targets: dict[str, int] | None = None
        self._last_progress: CheckpointProgress | None = None

    @cached_property
    def hook(self) -> CheckpointHook:
        return CheckpointHook(
            container=self.checkpoint_container,
            event_hubs_conn_id=self.event_hubs_conn_id,
            wasb_conn_id=self.wasb_conn_id,
            eventhub_name=self.eventhub_name,
        )

    def _consumer_groups(self) -> list[str]:
        groups = [self.consumer_groups] if isinstance(self.consumer_groups, str) else list(self.consumer_groups)
        if not groups or not all(isinstance(g, str) and g for g in groups):
            raise AirflowFailException(f"Task {self.task_id!r}: consumer_groups {self.consumer_groups!r} names no consumer group")
        return groups

    def poke(self, context: Context) -> PokeReturnValue:
        with airflow_errors(self.task_id):
            groups = self._consumer_groups()
            last_enqueued = None
            if self._resolved_targets is None:
                targets = parse_targets(self.targets)
                if targets is None:
                    if self.reschedule and not self.deferrable:
                        raise AirflowFailException(
                            f"Task {self.task_id!r}: targets rendered to nothing; reschedule mode needs explicit targets"
                        )
                    last_enqueued = self.hook.last_enqueued()
                    targets = dict(last_enqueued)
                    self.log.info(
                        "No targets given: waiting for everything enqueued in hub %r so far: %s",
                        self.hook.reader.eventhub_name, targets,
                    )
                self._resolved_targets = targets
            try:
                progress = self.hook.progress(self._resolved_targets, groups, last_enqueued)
            except Exception as exc:  # the container's failure, named as the deferred sensor names it (the hook
                mapped = self._storage_failure(exc)  # maps the hub's failures itself)
                if mapped is exc:
                    raise
                raise mapped from exc
        self._last_progress = progress
        metrics.checkpoint_lags(progress)
        self.log.info(
            "Checkpoints of hub %r in container %r: %s", progress.eventhub_name, self.checkpoint_container, progress.summary()
        )
        return PokeReturnValue(is_done=progress.reached, xcom_value=progress.checkpoints())

    def _storage_failure(self, exc: Exception) -> BaseException:
        """The error map's error for the checkpoint container's failure (``exc`` when it maps to nothing)."""
        try:
            site = self.hook.blob_hook.failure_site(self.checkpoint_container, container_field="checkpoint_container",
                                                    role="checkpoints", done=SENSOR_ONLY_READS)
        except Exception:  # the client cannot even be built: the error says why
            return exc
        return storage_failure(exc, site)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                if self._last_progress is None:
                    raise
                raise AirflowSensorTimeout(f"{exc} {self._last_progress.summary()}") from exc
        started = time.time()
        first = self.poke(context)
        if first.is_done:
            self.log.info("Success criteria met. Exiting.")
            return first.xcom_value
        self.defer(
            trigger=EventHubCheckpointTrigger(
                targets=dict(self._resolved_targets or {}),
                consumer_groups=self._consumer_groups(),
                container=self.checkpoint_container,
                eventhub_name=self.eventhub_name,
                event_hubs_conn_id=self.event_hubs_conn_id,
                wasb_conn_id=self.wasb_conn_id,
                poll_interval=self.poke_interval,
                deadline=started + self.timeout,
            ),
            method_name="execute_complete",
            # The trigger reports the timeout with the lag; this only backs it up.
            timeout=timedelta(seconds=self.timeout + max(60.0, 2 * self.poke_interval)),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Return the checkpoints on success; raise on a timeout, an error or a missing event."""
        if not event:
            raise AirflowException(f"Task {self.task_id!r}: the checkpoint trigger ended without an event")
        status, message = event.get("status"), event.get("message", "")
        if status == "success":
            progress = CheckpointProgress.from_dict(event["progress"])
            self.log.info("Checkpoints of hub %r in container %r: %s", progress.eventhub_name, self.checkpoint_container, message)
            return progress.checkpoints()
        if status == "timeout":
            raise AirflowSensorTimeout(f"Sensor has timed out after {self.timeout} seconds. {message}")
        raise task_error(self.task_id, "waiting on checkpoints", event)
