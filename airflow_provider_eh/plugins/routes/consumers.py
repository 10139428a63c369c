"""``GET /eventhubs/api/consumers``: a hub's consumer groups, their checkpoints and lag, read now."""

# No ``from __future__ import annotations``: FastAPI reads the route's annotations at run time.

from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.plugins.readers.consumers import consumer_groups
from airflow_provider_eh.plugins.readers.partitions import partition_properties
from airflow_provider_eh.plugins.readers.reading import Reading
from airflow_provider_eh.plugins.web import AuthorizedSource, answer, new_router

router = new_router()


@router.get("/api/consumers")
def consumers(source: AuthorizedSource) -> dict[str, Any]:
    """The hub's consumer groups, read now."""
    reading = Reading(source)

    def build() -> dict[str, Any]:
        now = datetime.now(UTC)
        return {"read_at": now.isoformat(), "consumer_groups": consumer_groups(reading, partition_properties(reading), now)}

    return answer(reading, build)
