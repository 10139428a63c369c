"""The Event Hubs view's FastAPI app: a page, its script and style, and a JSON API.

Airflow mounts plugin apps without applying authentication, so every route here depends on
Airflow's own :func:`~airflow.api_fastapi.core_api.security.get_user` (bearer token or the UI's
cookie: 401 without one) and the API routes additionally ask the auth manager whether the user may
read each connection the request names (403 otherwise): what a connection reaches is shown only to
those allowed to read the connection.
"""

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import FileResponse, HTMLResponse

from airflow_provider_eh.plugins import readers

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
DEFAULT_THRESHOLD = 3600.0


def _get_user_dep():
    from airflow.api_fastapi.core_api.security import get_user

    return get_user


def source_from(
    conn_id: Annotated[str, Query(description="the azure_event_hubs connection")],
    hub: Annotated[str | None, Query(description="the hub; default: the connection's")] = None,
    wasb_conn_id: str = "wasb_default",
    state_container: str | None = None,
    checkpoint_container: str | None = None,
    consumer_groups: Annotated[str | None, Query(description="comma-separated; default: those with checkpoints")] = None,
    sql_conn_id: str | None = None,
    sink_consumer_group: str = "$Default",
    sink_prefix: str | None = None,
) -> readers.Source:
    groups = tuple(g.strip() for g in (consumer_groups or "").split(",") if g.strip())
    return readers.Source(
        event_hubs_conn_id=conn_id, eventhub_name=hub or None, wasb_conn_id=wasb_conn_id,
        state_container=state_container or None, checkpoint_container=checkpoint_container or None,
        consumer_groups=groups, sql_conn_id=sql_conn_id or None, sink_consumer_group=sink_consumer_group,
        sink_prefix=sink_prefix or None,
    )


def create_app() -> FastAPI:
    get_user = _get_user_dep()
    app = FastAPI(title="Event Hubs view", docs_url=None, redoc_url=None, openapi_url=None)

    def authorized_source(source: Annotated[readers.Source, Depends(source_from)], user: Any = Depends(get_user)) -> readers.Source:
        from airflow.api_fastapi.app import get_auth_manager
        from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails

        manager = get_auth_manager()
        for conn_id in source.connection_ids():
            if not manager.is_authorized_connection(method="GET", details=ConnectionDetails(conn_id=conn_id), user=user):
                raise HTTPException(status.HTTP_403_FORBIDDEN, f"not allowed to read connection {conn_id!r}")
        return source

    @app.get("/", response_class=HTMLResponse)
    def page(user: Any = Depends(get_user)) -> HTMLResponse:
        return HTMLResponse((STATIC / "view.html").read_text())

    @app.get("/static/{name}")
    def static(name: str, user: Any = Depends(get_user)) -> FileResponse:
        if name not in {"view.js", "view.css"}:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no static file {name!r}")
        return FileResponse(STATIC / name, media_type="text/javascript" if name.endswith(".js") else "text/css")

    @app.get("/api/overview")
    def overview(
        source: Annotated[readers.Source, Depends(authorized_source)],
        pending_threshold_seconds: Annotated[float, Query(ge=0)] = DEFAULT_THRESHOLD,
    ) -> dict[str, Any]:
        return _guarded(source, lambda: _overview(source, pending_threshold_seconds))

    @app.get("/api/consumers")
    def consumers(source: Annotated[readers.Source, Depends(authorized_source)]) -> dict[str, Any]:
        return _guarded(source, lambda: {
            "read_at": datetime.now(timezone.utc).isoformat(),
            "consumer_groups": readers.consumer_groups(source, readers.partition_properties(source)),
        })

    return app


def _guarded(source: readers.Source, build: Any) -> dict[str, Any]:
    """Turn the readers' errors into answers naming the setting at fault; nothing else is echoed."""
    from airflow.exceptions import AirflowNotFoundException

    from airflow_provider_eh.errors import EventHubsProviderError

    try:
        return build()
    except AirflowNotFoundException as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"{exc}; check the connection ids in the view's settings") from None
    except EventHubsProviderError as exc:
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, str(exc)) from None
    except Exception as exc:
        log.exception("Event Hubs view: reading %s failed", source.event_hubs_conn_id)
        raise HTTPException(
            status.HTTP_502_BAD_GATEWAY,
            f"reading the state of connection {source.event_hubs_conn_id!r} failed ({type(exc).__name__}); "
            "see the API server log",
        ) from None


def _overview(source: readers.Source, threshold: float) -> dict[str, Any]:
    started = time.perf_counter()
    timings: dict[str, float] = {}

    def timed(name: str, read: Any) -> Any:
        begin = time.perf_counter()
        try:
            return read()
        finally:
            timings[name] = round(time.perf_counter() - begin, 3)

    now = datetime.now(timezone.utc)
    endpoint = readers.endpoint_of(source)
    with ThreadPoolExecutor(2) as pool:  # the hub's management requests and the state blobs, side by side
        props_future = pool.submit(timed, "partitions", lambda: readers.partition_properties(source))
        producers = timed("producer_groups", lambda: readers.producer_groups(source, now))
        props = props_future.result()
    wanted: dict[str, str] = {}
    for group in producers:
        for row in group["partitions"]:
            batches = [row.get("last_committed")] + list(row.get("open_batches", []))
            for batch in filter(None, batches):
                wanted[batch["batch_id"]] = group["group"]
                if batch.get("age_seconds") is not None:
                    batch["stale"] = batch["age_seconds"] > threshold
    links = timed("task_instances", lambda: readers.task_instance_links(wanted.items()) if wanted else {})
    for group in producers:
        for row in group["partitions"]:
            for batch in filter(None, [row.get("last_committed")] + list(row.get("open_batches", []))):
                batch["task_instance"] = links.get(batch["batch_id"])
    consumers = timed("consumer_groups", lambda: readers.consumer_groups(source, props))
    dead = timed("dead_letters", lambda: readers.dead_letters(source))
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
