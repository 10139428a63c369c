"""Load, exactly once, what the asset events of :class:`EventHubEventTrigger` that started a run name.

:class:`EventHubIngestEventsOperator` is :class:`~airflow_provider_eh.operators.ingest.EventHubIngestOperator`
bounded by the run's triggering asset events of its own hub (namespace and hub; asset events of
other hubs a DAG is also scheduled on are ignored) instead of the hub's end: each partition is
loaded from the loader's SQL checkpoint up to the highest ``last`` sequence number those asset events
name. That range can hold more than the asset events name: events an earlier run did not reach
(the range starts at the SQL checkpoint) and events the watcher's filter dropped. Every batch keeps
the ingest operator's guarantees (one SQL transaction with its checkpoint and the dedupe marks), so
an asset event fired twice (a triggerer restart) loads nothing the second time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.hooks.event_hubs import EventHubHook
from airflow_provider_eh.operators.ingest import EventHubIngestOperator
from airflow_provider_eh.operators.task_errors import airflow_errors
from airflow_provider_eh.triggers.payload import ranges_of

if TYPE_CHECKING:
    from airflow.sdk import Context


def triggering_payloads(
    context: Mapping[str, Any], eventhub_name: str | None = None, namespace: str | None = None,
) -> list[dict[str, Any]]:
    """
    The event trigger payloads among the run's triggering asset events: those of ``eventhub_name`` in
    ``namespace`` when given (compared case-insensitively, as the service names them).
    """
    found = []
    for events in (context.get("triggering_asset_events") or {}).values():
        for event in events:
            payload = (getattr(event, "extra", None) or {}).get("payload")
            if not isinstance(payload, dict) or "partitions" not in payload:
                continue
            if eventhub_name is not None and str(payload.get("eventhub", "")).lower() != eventhub_name.lower():
                continue
            if namespace is not None and str(payload.get("namespace", "")).lower() != namespace.lower():
                continue
            found.append(payload)
    return found


class EventHubIngestEventsOperator(EventHubIngestOperator):
    """
    Ingest, exactly once, each partition up to the last sequence number the run's triggering asset events name.

    Takes every argument of :class:`EventHubIngestOperator`. Only asset events of the operator's own
    hub count (its namespace and hub, from ``event_hubs_conn_id`` and ``eventhub_name``). A run without
    such asset events (triggered by hand) loads up to the hub's end as the ingest operator does.
    Returns the ingest operator's summary plus ``ranges`` (``{partition: {first, last}}`` of those
    asset events).
    """

    def _payloads(self, context: Context) -> list[dict[str, Any]]:
        """The run's triggering payloads of this operator's namespace and hub."""
        endpoint = EventHubHook(self.event_hubs_conn_id, self.eventhub_name).get_endpoint()
        return triggering_payloads(context, endpoint.eventhub_name, endpoint.namespace)

    def _upto(self, context: Context) -> dict[str, int] | None:
        ranges = ranges_of(self._payloads(context))
        return {p: r["last"] for p, r in ranges.items()} if ranges else None

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(self.task_id):
            payloads = self._payloads(context)
        ranges = ranges_of(payloads)
        if not payloads:
            self.log.info("No triggering asset events of this hub: loading up to the hub's end")
        else:
            self.log.info("Loading up to %s from %d asset events",
                          ", ".join(f"partition {p}: seq {r['last']}" for p, r in sorted(ranges.items())), len(payloads))
        return {**super().execute(context), "ranges": ranges}
