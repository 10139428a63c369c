"""``GET /eventhubs/api/trends``: a hub's lag and published events over the last ``hours``
(:mod:`~airflow_provider_eh.plugins.trends`); the API server's sampler then watches the hub too."""

# No ``from __future__ import annotations``: FastAPI reads the route's annotations at run time.

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Query

from airflow_provider_eh.plugins.readers.reading import Reading
from airflow_provider_eh.plugins.sampler import SamplingSettings, watch
from airflow_provider_eh.plugins.trends import MAX_HOURS, trends
from airflow_provider_eh.plugins.web import AuthorizedSource, answer, new_router

router = new_router()


@router.get("/api/trends")
def trends_route(
    source: AuthorizedSource,
    hours: Annotated[float, Query(gt=0, le=MAX_HOURS, description="the window, in hours before now")] = 24.0,
) -> dict[str, Any]:
    """The hub's trends over the ``hours`` before now."""
    reading = Reading(source)

    def build() -> dict[str, Any]:
        settings = SamplingSettings.from_conf()
        body = trends(reading, settings, datetime.now(UTC), hours)
        watch(source, settings)  # a hub read once: the sampler reads it too
        return body

    return answer(reading, build)
