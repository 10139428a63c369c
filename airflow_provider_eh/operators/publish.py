"""Publish events to Event Hubs exactly once: a thin shell over :mod:`airflow_provider_eh.publishing`.

The batch id is derived from the DAG, the task, the run's data interval (else its logical date,
else its run id), the map index and ``generation``: a retry, a clear-and-rerun and a backfill of the
same interval publish nothing twice. Nothing needed for recovery lives in XCom (Airflow 3 clears a
task's XComs before a retry); the producer state store holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_eh.operators.base_publish import BasePublishOperator
from airflow_provider_eh.operators.settings import Delivery, EventSchema, ProducerState
from airflow_provider_eh.publishing.typed import TypedBatch

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["Delivery", "EventHubPublishOperator", "EventSchema", "ProducerState"]


class _EventsFunction:
    """A ``(context) -> events`` function in the form Airflow calls a callable templated field: ``(context=, jinja_env=)``."""

    def __init__(self, function: Callable[[Context], Iterable[Any]]):
        self.function = function

    def __call__(self, context: Context, jinja_env: Any = None) -> Iterable[Any]:
        return self.function(context)

    def __repr__(self) -> str:
        return f"<events from {getattr(self.function, '__qualname__', self.function)!s}>"


class EventHubPublishOperator(BasePublishOperator):
    """
    Publish a batch of events to one hub, each event exactly once across retries, re-runs and backfills.

    Each event is a mapping ``{"body": ..., "properties": {...}, "partition_id": "0"}`` (or
    ``"partition_key": ...`` instead of ``partition_id``), or a bare body that goes to
    ``partition_id``. Bodies may be bytes, str or JSON-serialisable values (sent as canonical JSON).
    Keys map to partitions by the provider's documented stable hash (see
    :func:`airflow_provider_eh.publishing.partition_for_key`), not the service's.

    Returns (XCom) per partition ``{events, first_seq, last_seq, service_last_sequence_number, fencing,
    lease_only_batch_bytes, status, landed, resent, readback_seconds}``: ``fencing`` is ``"hub"`` or ``"lease"``,
    the fence that held the send, ``lease_only_batch_bytes`` the most bytes of one SDK batch under ``"lease"``
    (``None`` under ``"hub"``), ``status`` ``"published"``, ``"recovered"`` or ``"already_committed"``, and
    ``landed``, ``resent`` and ``readback_seconds`` what settling a batch in doubt found, sent and took.

    :param events: a list of events, a callable ``(context) -> iterable of events``, or an upstream
        task's output (``upstream.output``), which makes that task upstream of this one. (templated)
        Strings in a literal list are Jinja templates, as in every templated field (``"{{ ds }}"``
        renders); events from an upstream output or a callable, and bytes bodies, are sent as they are.
    :param partition_id: partition of bare-body events.
    :param schema_group: with the other ``schema*`` arguments (see
        :class:`~airflow_provider_eh.operators.base_publish.BasePublishOperator`): each body is a row,
        encoded against a schema of the namespace's Schema Registry by Microsoft's encoder. (templated)

    The hub, connections, state store, producer group, generation, lease and fencing arguments
    (``hub_fencing``, ``lease_only_batch_bytes``) are
    :class:`~airflow_provider_eh.operators.base_publish.BasePublishOperator`'s.
    """

    template_fields: Sequence[str] = ("events", *BasePublishOperator.template_fields)

    def __init__(
        self,
        *,
        events: Iterable[Any] | Callable[[Context], Iterable[Any]] | Any,
        partition_id: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.events = _EventsFunction(events) if callable(events) else events
        self.partition_id = partition_id

    def _typed(self, events: Iterable[Any]) -> tuple[Iterable[Any], dict[str, Any]]:
        """``(events, publisher arguments)``: with a schema, every body encoded (all rows before anything is
        sent) and the content type and schema for the publisher; else the events as they are."""
        encoder = self.row_encoder()
        if encoder is None:
            return events, {}
        batch = TypedBatch(encoder)
        encoded = batch.encode(events)
        self.log.info("encoded %d events against %s", len(encoded), encoder.used.describe())
        return encoded, {"content_type": encoder.content_type, "schema": encoder.used.to_dict()}

    def _events(self, context: Context) -> Iterable[Any]:
        events = self.events
        if isinstance(events, _EventsFunction):  # not rendered: ``execute`` called without Airflow's templating
            events = events(context)
        if events is None:
            raise AirflowFailException(f"Task {self.task_id!r}: `events` resolved to None; nothing to publish")
        return events

    def execute(self, context: Context) -> dict[str, dict[str, int]]:
        group = self.resolved_producer_group
        with self.provider_errors(), self.measured():
            events, typed = self._typed(self._events(context))
            publisher = self.get_publisher(origin=self.origin(context), **typed)
            batch_id = self.batch_id(context, group)
            self.log.info(
                "group %s batch %s: publishing to hub %s with the %s state backend (attempt %s)",
                group, batch_id[:16], publisher.endpoint.eventhub_name, self.backend, context["ti"].try_number,
            )
            results = publisher.publish(events, batch_id=batch_id, default_partition=self.partition_id)
        return self.report(batch_id, results)
