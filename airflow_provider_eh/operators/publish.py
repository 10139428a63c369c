"""Publish events to Event Hubs exactly once: a thin shell over :mod:`airflow_provider_eh.publishing`.

The batch id is derived from the DAG, the task, the run's data interval (else its logical date,
else its run id), the map index and ``generation``: a retry, a clear-and-rerun and a backfill of the
same interval publish nothing twice. Nothing needed for recovery lives in XCom (Airflow 3 clears a
task's XComs before a retry); the producer state store holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_eh.errors import EventHubsProviderError
from airflow_provider_eh.hooks.event_hubs import EventHubsHook
from airflow_provider_eh.hooks.producer_state import ProducerStateHook
from airflow_provider_eh.publishing import IdempotentPublisher, PartitionOptions, derive_batch_id

if TYPE_CHECKING:
    from airflow.sdk import Context


class EventHubPublishOperator(BaseOperator):
    """
    Publish a batch of events to one hub, each event exactly once across retries, re-runs and backfills.

    Each event is a mapping ``{"body": ..., "properties": {...}, "partition_id": "0"}`` (or
    ``"partition_key": ...`` instead of ``partition_id``), or a bare body that goes to
    ``partition_id``. Bodies may be bytes, str or JSON-serialisable values (sent as canonical JSON).
    Keys map to partitions by the provider's documented stable hash (see
    :func:`airflow_provider_eh.publishing.partition_for_key`), not the service's.

    Returns (XCom) per partition ``{events, first_seq, last_seq, service_last_sequence_number}``.

    :param events: a list of events, a callable ``(context) -> iterable of events``, or an XComArg
        (``upstream.output``) resolving to a list.
    :param eventhub_name: the hub (templated); default: the connection's.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection (templated).
    :param state_backend: ``"blob"`` or ``"variable"`` (templated); default ``"blob"`` when
        ``state_container`` is given, else ``"variable"`` (single-writer: serialise runs of the group).
    :param wasb_conn_id: the ``wasb`` connection of the blob backend (templated).
    :param state_container: the container holding producer states (templated).
    :param producer_group: the producer group (templated); default ``"{dag_id}.{task_id}"``.
    :param generation: bump to republish the same interval on purpose (templated).
    :param partition_id: partition of bare-body events.
    :param partition_options: per partition ``{"producer_group", "owner_level", "starting_sequence_number"}``.
    :param keep_committed: prune the ledger to this many recent batches per partition (default: keep all;
        a pruned batch re-run would publish again).
    :param send_attempts: in-process attempts per partition on transient send errors.
    :param lease_seconds: blob lease duration (15 to 60).
    :param claim_timeout: seconds to wait for another publisher's blob lease before failing (retryably).
    """

    template_fields: Sequence[str] = (
        "eventhub_name",
        "event_hubs_conn_id",
        "state_backend",
        "wasb_conn_id",
        "state_container",
        "producer_group",
        "generation",
    )
    ui_color = "#0078d4"

    def __init__(
        self,
        *,
        events: Iterable[Any] | Callable[[Context], Iterable[Any]] | Any,
        eventhub_name: str | None = None,
        event_hubs_conn_id: str = "azure_event_hubs_default",
        state_backend: str | None = None,
        wasb_conn_id: str = "wasb_default",
        state_container: str | None = None,
        producer_group: str | None = None,
        generation: int | str = 0,
        partition_id: str | None = None,
        partition_options: Mapping[str, Mapping[str, Any]] | None = None,
        keep_committed: int | None = None,
        send_attempts: int = 3,
        lease_seconds: int = 15,
        claim_timeout: float = 0.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.events = events
        self.eventhub_name = eventhub_name
        self.event_hubs_conn_id = event_hubs_conn_id
        self.state_backend = state_backend
        self.wasb_conn_id = wasb_conn_id
        self.state_container = state_container
        self.producer_group = producer_group
        self.generation = generation
        self.partition_id = partition_id
        self.partition_options = partition_options
        self.keep_committed = keep_committed
        self.send_attempts = send_attempts
        self.lease_seconds = lease_seconds
        self.claim_timeout = claim_timeout

    def _events(self, context: Context) -> Iterable[Any]:
        events = self.events
        if hasattr(events, "resolve") and not isinstance(events, (list, tuple)):
            events = events.resolve(context)
        elif callable(events):
            events = events(context)
        if events is None:
            raise AirflowFailException(f"Task {self.task_id!r}: `events` resolved to None; nothing to publish")
        return events

    def batch_id(self, context: Context, group: str) -> str:
        """The derived batch id of this task instance."""
        ti = context["ti"]
        return derive_batch_id(
            group, self.dag_id, self.task_id,
            interval_start=context.get("data_interval_start"), interval_end=context.get("data_interval_end"),
            logical_date=context.get("logical_date"), run_id=context.get("run_id"),
            map_index=getattr(ti, "map_index", -1) if getattr(ti, "map_index", None) is not None else -1,
            generation=int(self.generation or 0),
        )

    def execute(self, context: Context) -> dict[str, dict[str, int]]:
        group = self.producer_group or f"{self.dag_id}.{self.task_id}"
        backend = self.state_backend or ("blob" if self.state_container else "variable")
        try:
            endpoint = EventHubsHook(self.event_hubs_conn_id, self.eventhub_name).get_endpoint()
            store = ProducerStateHook(
                backend, wasb_conn_id=self.wasb_conn_id, container=self.state_container,
                lease_seconds=self.lease_seconds, claim_timeout=self.claim_timeout,
            ).get_store()
            options = {str(p): PartitionOptions(**dict(o)) for p, o in (self.partition_options or {}).items()}
            publisher = IdempotentPublisher(
                endpoint, store, producer_group=group, partition_options=options,
                keep_committed=self.keep_committed, send_attempts=self.send_attempts,
            )
            batch_id = self.batch_id(context, group)
            self.log.info(
                "group %s batch %s: publishing to hub %s with the %s state backend (attempt %s)",
                group, batch_id[:16], endpoint.eventhub_name, backend, context["ti"].try_number,
            )
            results = publisher.publish(self._events(context), batch_id=batch_id, default_partition=self.partition_id)
        except EventHubsProviderError as exc:
            if exc.retryable:
                raise
            raise AirflowFailException(f"Task {self.task_id!r}: {exc}") from exc
        except ValueError as exc:  # configuration errors (backend name, missing container, lease bounds)
            raise AirflowFailException(f"Task {self.task_id!r}: {exc}") from exc
        for pid, result in sorted(results.items()):
            self.log.info(
                "group %s batch %s partition %s: %s, %d events, seq %d..%d, service seq up to %d%s",
                group, batch_id[:16], pid, result.status, result.events, result.first_seq, result.last_seq,
                result.service_last_sequence_number,
                f" (recovery: {result.landed} landed, {result.resent} resent)" if result.status == "recovered" else "",
            )
        return {pid: result.as_xcom() for pid, result in sorted(results.items())}
