"""Load exactly the events that triggered a run (asset events of :class:`EventHubEventTrigger`), exactly once.

:class:`EventHubIngestEventsOperator` is :class:`~airflow_provider_eh.operators.ingest.EventHubIngestOperator`
bounded by the triggering asset events instead of the hub's end: each partition is loaded from the
loader's SQL checkpoint up to the highest ``last`` sequence number the run's asset events name. Every
batch keeps the ingest operator's guarantees (one SQL transaction with its checkpoint and the dedupe
marks), so an asset event fired twice (a triggerer restart) loads nothing the second time, and events
an earlier run did not reach are loaded by the next one (the range starts at the SQL checkpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.operators.ingest import EventHubIngestOperator
from airflow_provider_eh.triggers.event import ranges_of

if TYPE_CHECKING:
    from airflow.sdk import Context


def triggering_payloads(context: Mapping[str, Any], eventhub_name: str | None = None) -> list[dict[str, Any]]:
    """The event trigger payloads among the run's triggering asset events (of ``eventhub_name`` if given)."""
    found = []
    for events in (context.get("triggering_asset_events") or {}).values():
        for event in events:
            payload = (getattr(event, "extra", None) or {}).get("payload")
            if isinstance(payload, dict) and "partitions" in payload:
                if eventhub_name is None or payload.get("eventhub") == eventhub_name:
                    found.append(payload)
    return found


class EventHubIngestEventsOperator(EventHubIngestOperator):
    """
    Ingest, exactly once, the events named by the run's triggering asset events (an event-driven DAG).

    Takes every argument of :class:`EventHubIngestOperator`. A run without such asset events (triggered
    by hand) loads up to the hub's end as the ingest operator does. Returns the ingest operator's
    summary plus ``ranges`` (``{partition: {first, last}}`` of the asset events).
    """

    def _upto(self, context: Context) -> dict[str, int] | None:
        ranges = ranges_of(triggering_payloads(context))
        return {p: r["last"] for p, r in ranges.items()} if ranges else None

    def execute(self, context: Context) -> dict[str, Any]:
        payloads = triggering_payloads(context)
        ranges = ranges_of(payloads)
        if not payloads:
            self.log.info("No triggering Event Hubs asset events: loading up to the hub's end")
        else:
            self.log.info("Loading up to %s from %d asset events",
                          ", ".join(f"partition {p}: seq {r['last']}" for p, r in sorted(ranges.items())), len(payloads))
        return {**super().execute(context), "ranges": ranges}
