"""The Event Hubs view's FastAPI app: a page, its script and style, and a JSON API.

Airflow mounts plugin apps without applying authentication, so every route here depends on
Airflow's own :func:`~airflow.api_fastapi.core_api.security.get_user` (bearer token or the UI's
cookie: 401 without one) and the API routes additionally ask the auth manager whether the user may
read each connection the request names, with the connection's team when ``[core] multi_team`` is
on (403 otherwise): what a connection reaches is shown only to those allowed to read the
connection. Links to task instances are given only for DAGs whose task instances the user may read.

Every answer is scrubbed of the named connections' secrets and of what Airflow's secrets masker
holds (:mod:`~airflow_provider_eh.plugins.redaction`); failures name what was read and what to
check, never an error's raw text. Pages and links are built from ``[api] base_url``'s path, so the
view works when Airflow is served under a sub-path.
"""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations at run time, and
# those naming ``authorized_source`` must resolve inside ``create_app``.

import html
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, status
from fastapi.responses import FileResponse, HTMLResponse

from airflow_provider_eh.errors import ViewReadError
from airflow_provider_eh.plugins import links
from airflow_provider_eh.plugins.readers.consumers import consumer_groups
from airflow_provider_eh.plugins.readers.dead_letters import dead_letters
from airflow_provider_eh.plugins.readers.discovery import connection_summary, event_hubs_connection_ids, settle
from airflow_provider_eh.plugins.readers.discovery import hubs as discovered_hubs
from airflow_provider_eh.plugins.readers.ledgers import is_stale, ledger_history, producer_groups
from airflow_provider_eh.plugins.readers.partitions import partition_properties
from airflow_provider_eh.plugins.readers.reading import Reading, Source
from airflow_provider_eh.plugins.readers.variables import variable_reader
from airflow_provider_eh.plugins.trends import trends_router
from airflow_provider_eh.plugins.urls import URL_PREFIX, base_path
from airflow_provider_eh.plugins.web import (
    answer,
    auth_manager,
    check_connections,
    readable_connections,
    user_dependency,
)

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
DEFAULT_THRESHOLD = 3600.0


def render_page(base: str) -> str:
    """The view's page for an Airflow served at ``base`` (a path ending in ``/``): every URL in it starts there."""
    view = f"{base}{URL_PREFIX.strip('/')}/"
    return (
        (STATIC / "view.html").read_text()
        .replace("{{ airflow_base }}", html.escape(base, quote=True))
        .replace("{{ view_base }}", html.escape(view, quote=True))
    )


def source_from(
    conn_id: Annotated[str, Query(description="the azure_event_hubs connection")],
    hub: Annotated[str | None, Query(description="the hub; default: the connection's")] = None,
    wasb_conn_id: Annotated[str | None, Query(description="default: the connection's, the configuration's, wasb_default")] = None,
    state_container: str | None = None,
    checkpoint_container: str | None = None,
    consumer_groups: Annotated[str | None, Query(description="comma-separated; default: those with checkpoints")] = None,
    sql_conn_id: str | None = None,
    sink_consumer_group: str = "$Default",
    sink_prefix: str | None = None,
    lag_consumer_group: Annotated[str, Query(description="read the first unprocessed event's time as this group")] = "$Default",
) -> Source:
    """The view's ``Source`` that a request's query parameters describe (a FastAPI dependency of the API routes)."""
    groups = tuple(g.strip() for g in (consumer_groups or "").split(",") if g.strip())
    return Source(
        event_hubs_conn_id=conn_id, eventhub_name=hub or None, wasb_conn_id=wasb_conn_id or None,
        state_container=state_container or None, checkpoint_container=checkpoint_container or None,
        consumer_groups=groups, sql_conn_id=sql_conn_id or None, sink_consumer_group=sink_consumer_group,
        sink_prefix=sink_prefix or None, lag_consumer_group=lag_consumer_group or "$Default",
    )


def create_app() -> FastAPI:
    """The view's FastAPI app: the page, its static files and the JSON API, each route checking that the
    user may read the connections it uses."""
    get_user = user_dependency()
    app = FastAPI(title="Event Hubs view", docs_url=None, redoc_url=None, openapi_url=None)

    def settled_source(
        source: Annotated[Source, Depends(source_from)], user: Any = Depends(get_user)
    ) -> tuple[Source, dict[str, str]]:
        """The request's source once the user may read its Event Hubs connection, with what it leaves unset
        taken from that connection or the configuration, and the user may read every connection it then uses."""
        manager = auth_manager()
        check_connections(manager, user, [source.event_hubs_conn_id])
        reading = Reading(source)
        try:
            extras = reading.connection(source.event_hubs_conn_id).extra_dejson or {}
        except ViewReadError as exc:
            raise HTTPException(exc.status_code, exc.message) from None
        settled, origins = settle(source, extras)
        check_connections(manager, user, settled.connection_ids()[1:])
        return settled, origins

    def authorized_source(settled: Annotated[tuple[Source, dict[str, str]], Depends(settled_source)]) -> Source:
        return settled[0]

    @app.get("/", response_class=HTMLResponse)
    def page(user: Any = Depends(get_user)) -> HTMLResponse:
        return HTMLResponse(render_page(base_path()))

    @app.get("/static/{name}")
    def static(name: str, user: Any = Depends(get_user)) -> FileResponse:
        if name not in {"view.js", "view.css", "format.js", "dom.js", "charts.js"}:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no static file {name!r}")
        return FileResponse(STATIC / name, media_type="text/javascript" if name.endswith(".js") else "text/css")

    from airflow_provider_eh.plugins.tabs import tab_router  # the Event Hubs tab of task-instance pages

    app.include_router(tab_router())

    @app.get("/api/overview")
    def overview(
        source: Annotated[Source, Depends(authorized_source)],
        user: Any = Depends(get_user),
        pending_threshold_seconds: Annotated[float, Query(ge=0)] = DEFAULT_THRESHOLD,
    ) -> dict[str, Any]:

        manager = auth_manager()

        def may_read(dag_ids: Iterable[str]) -> set[str]:
            return links.readable_dags(manager, user, links.dag_teams(dag_ids))

        reading = Reading(source)
        may_read_variable = variable_reader(manager, user)
        return answer(reading, lambda: _overview(reading, pending_threshold_seconds, may_read, may_read_variable))

    @app.get("/api/history")
    def history(
        source: Annotated[Source, Depends(authorized_source)],
        group: Annotated[str, Query(min_length=1)],
        partition: Annotated[str, Query(min_length=1)],
        user: Any = Depends(get_user),
        before: Annotated[int | None, Query(ge=0)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        backend: Annotated[str, Query(pattern="^(blob|variable)$", description="where the ledger is kept")] = "blob",
    ) -> dict[str, Any]:

        manager = auth_manager()
        if backend == "variable":
            from airflow_provider_eh.plugins.readers.variables import state_key

            key = state_key(group, partition)
            if not variable_reader(manager, user)(key):
                raise HTTPException(status.HTTP_403_FORBIDDEN, f"not allowed to read Airflow Variable {key!r}")

        def build() -> dict[str, Any]:
            page = ledger_history(reading, group, partition, before, limit, backend)
            _link_batches([(group, b) for b in page["batches"]],
                          lambda dag_ids: links.readable_dags(manager, user, links.dag_teams(dag_ids)))
            return page

        reading = Reading(source)
        return answer(reading, build)

    @app.get("/api/consumers")
    def consumers(source: Annotated[Source, Depends(authorized_source)]) -> dict[str, Any]:
        reading = Reading(source)

        def build() -> dict[str, Any]:
            now = datetime.now(UTC)
            return {
                "read_at": now.isoformat(),
                "consumer_groups": consumer_groups(reading, partition_properties(reading), now),
            }

        return answer(reading, build)

    @app.get("/api/connections")
    def connections(user: Any = Depends(get_user)) -> dict[str, Any]:
        """The ``azure_event_hubs`` connections the user may read, each with its namespace and own hub."""
        readable = readable_connections(auth_manager(), user, event_hubs_connection_ids())
        reading = Reading(Source(event_hubs_conn_id=""))
        return answer(reading, lambda: {"connections": [connection_summary(reading, c) for c in readable]})

    @app.get("/api/hubs")
    def hubs(
        settled: Annotated[tuple[Source, dict[str, str]], Depends(settled_source)], user: Any = Depends(get_user)
    ) -> dict[str, Any]:
        """The hubs found for a connection (its own, those of the state and checkpoint stores) and where its state lives."""
        source, origins = settled
        reading = Reading(source)
        may_read_variable = variable_reader(auth_manager(), user)
        return answer(reading, lambda: discovered_hubs(reading, origins, may_read_variable))

    app.include_router(trends_router(authorized_source))
    return app


def _link_batches(batches: list[tuple[str, dict[str, Any]]], may_read: Callable[[Iterable[str]], set[str]]) -> None:
    """Give each ``(group, batch)``'s batch its ``task_instance`` link (``None`` where the user may not read
    the DAG or none is found), in place of its ``origin``."""
    wanted: dict[str, str] = {}  # batches that do not name their task instance: found by their derived ids
    recorded: dict[str, dict[str, Any]] = {}  # batches whose ledger entry names it
    for group, batch in batches:
        origin = batch.pop("origin", None)
        if links.is_origin(origin):
            recorded[batch["batch_id"]] = origin
        else:
            wanted[batch["batch_id"]] = group
    found = {**links.task_instance_links(wanted, may_read), **links.origin_links(recorded, may_read)}
    for _, batch in batches:
        batch["task_instance"] = found.get(batch["batch_id"])


def _overview(reading: Reading, threshold: float, may_read: Callable[[Iterable[str]], set[str]],
              may_read_variable: Callable[[str], bool] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    timings: dict[str, float] = {}

    def timed(name: str, read: Callable[[], Any]) -> Any:
        begin = time.perf_counter()
        try:
            return read()
        finally:
            timings[name] = round(time.perf_counter() - begin, 3)

    now = datetime.now(UTC)
    endpoint = reading.endpoint
    with ThreadPoolExecutor(2) as pool:  # the hub's management requests, then the checkpoints; the state blobs beside
        props_future = pool.submit(timed, "partitions", lambda: partition_properties(reading))
        consumers_future = pool.submit(
            timed, "consumer_groups", lambda: consumer_groups(reading, props_future.result(), now))
        producers = timed("producer_groups", lambda: producer_groups(reading, now, may_read_variable))
        props = props_future.result()
        consumers = consumers_future.result()
    batches = []
    for group in producers:
        for row in group["partitions"]:
            for batch in filter(None, [row.get("last_committed"), *row.get("open_batches", [])]):
                batches.append((group["group"], batch))
                if "age_seconds" in batch:
                    batch["stale"] = is_stale(batch["age_seconds"], threshold)
    timed("task_instances", lambda: _link_batches(batches, may_read))
    dead = timed("dead_letters", lambda: dead_letters(reading))
    return {
        "namespace": endpoint.namespace,
        "hub": endpoint.eventhub_name,
        "read_at": now.isoformat(),
        "pending_threshold_seconds": threshold,
        "partitions": props,
        "producer_groups": producers,
        "consumer_groups": consumers,
        "dead_letters": dead,
        "elapsed_seconds": round(time.perf_counter() - started, 3),
        "timings": timings,
    }
