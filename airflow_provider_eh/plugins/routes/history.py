"""``GET /eventhubs/api/history``: a page of one ledger's batches, newest first, in the state container or in the
Airflow Variables the user may read, each with a link to its task instance where the user may read its DAG."""

# No ``from __future__ import annotations``: FastAPI reads the route's annotations at run time.

from typing import Annotated, Any

from fastapi import Query

from airflow_provider_eh.plugins.links import link_batches
from airflow_provider_eh.plugins.readers.ledgers import ledger_history
from airflow_provider_eh.plugins.readers.reading import Reading
from airflow_provider_eh.plugins.readers.variables import state_key
from airflow_provider_eh.plugins.web import AuthorizedSource, Permissions, answer, new_router

router = new_router()


@router.get("/api/history")
def history(
    source: AuthorizedSource,
    group: Annotated[str, Query(min_length=1)],
    partition: Annotated[str, Query(min_length=1)],
    allowed: Permissions,
    before: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    backend: Annotated[str, Query(pattern="^(blob|variable)$", description="where the ledger is kept")] = "blob",
) -> dict[str, Any]:
    """A page of one ledger's batches before ``before`` (an ordinal), newest first."""
    if backend == "variable":
        allowed.require_variable(state_key(group, partition))
    reading = Reading(source)

    def build() -> dict[str, Any]:
        page = ledger_history(reading, group, partition, before, limit, backend)
        link_batches([(group, batch) for batch in page["batches"]], allowed.dags)
        return page

    return answer(reading, build)
