"""``GET /eventhubs/api/connections`` and ``/api/hubs``: the connections the user may read, and the hubs found for
one (:mod:`~airflow_provider_eh.plugins.readers.discovery`)."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations at run time.

from typing import Any

from airflow_provider_eh.plugins.readers.discovery import connection_summary, event_hubs_connection_ids, hubs
from airflow_provider_eh.plugins.readers.reading import Reading, Source
from airflow_provider_eh.plugins.web import Permissions, SettledSource, answer, new_router

router = new_router()


@router.get("/api/connections")
def connections(allowed: Permissions) -> dict[str, Any]:
    """The ``azure_event_hubs`` connections the user may read, each with its namespace and own hub."""
    readable = allowed.connections(event_hubs_connection_ids())
    reading = Reading(Source(event_hubs_conn_id=""))
    return answer(reading, lambda: {"connections": [connection_summary(reading, c) for c in readable]})


@router.get("/api/hubs")
def found_hubs(settled: SettledSource, allowed: Permissions) -> dict[str, Any]:
    """The hubs found for a connection (its own, those of the state and checkpoint stores) and where its state lives."""
    reading = Reading(settled.source)
    may_read_variable = allowed.variable
    return answer(reading, lambda: hubs(reading, settled.origins, may_read_variable))
