"""The Event Hubs tab of task instance pages (:mod:`~airflow_provider_eh.plugins.tabs`): its page, its script and
``GET /eventhubs/api/task-instance``, for users who may read the DAG's task instances and every connection the
task names."""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations at run time.

from typing import Annotated, Any

from fastapi import HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse

from airflow_provider_eh.errors import ViewReadError
from airflow_provider_eh.plugins.readers.reading import Reading
from airflow_provider_eh.plugins.redaction import scrub
from airflow_provider_eh.plugins.tabs import STATIC, TaskInstanceFacts, render_tab, tab_answer
from airflow_provider_eh.plugins.urls import base_path
from airflow_provider_eh.plugins.web import Permissions, answer, new_router

router = new_router()


@router.get("/tab", response_class=HTMLResponse)
def tab() -> HTMLResponse:
    """The tab's page, loaded in a frame of Airflow's task instance page."""
    return HTMLResponse(render_tab(base_path()))


@router.get("/tab/static/tab.js")
def tab_script() -> FileResponse:
    """The tab's script."""
    return FileResponse(STATIC / "tab.js", media_type="text/javascript")


@router.get("/api/task-instance")
def task_instance(
    dag_id: Annotated[str, Query(min_length=1)],
    run_id: Annotated[str, Query(min_length=1)],
    task_id: Annotated[str, Query(min_length=1)],
    allowed: Permissions,
    map_index: Annotated[int, Query(ge=-1)] = -1,
) -> dict[str, Any]:
    """What the tab shows of one task instance: its kind, and what it published, waited for or ingested."""
    allowed.require_dag(dag_id)
    try:
        facts = TaskInstanceFacts(dag_id, run_id, task_id, map_index).load()
    except ViewReadError as exc:
        raise HTTPException(exc.status_code, scrub(exc.message)) from None
    if facts.kind is None:
        return scrub(facts.about())
    allowed.require_connections(facts.connection_ids())
    reading = Reading(facts.source())
    return answer(reading, lambda: tab_answer(facts, reading, allowed.variable))
