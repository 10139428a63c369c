"""``GET /eventhubs/api/overview``: a hub's partitions, producer and consumer groups and dead letters
(:mod:`~airflow_provider_eh.plugins.overview`), with links to the task instances the user may read."""

# No ``from __future__ import annotations``: FastAPI reads the route's annotations at run time.

from typing import Annotated, Any

from fastapi import Query

from airflow_provider_eh.plugins.overview import DEFAULT_THRESHOLD, overview
from airflow_provider_eh.plugins.readers.reading import Reading
from airflow_provider_eh.plugins.web import AuthorizedSource, Permissions, answer, new_router

router = new_router()


@router.get("/api/overview")
def overview_route(
    source: AuthorizedSource,
    allowed: Permissions,
    pending_threshold_seconds: Annotated[float, Query(ge=0)] = DEFAULT_THRESHOLD,
) -> dict[str, Any]:
    """The hub's overview; batches open longer than ``pending_threshold_seconds`` are stale."""
    reading = Reading(source)
    may_read_variable = allowed.variable
    return answer(reading, lambda: overview(reading, pending_threshold_seconds, allowed.dags, may_read_variable))
