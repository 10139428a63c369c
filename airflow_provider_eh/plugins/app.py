"""The Event Hubs view's FastAPI app: a page, its script and style, and a JSON API, one router an API
(:mod:`~airflow_provider_eh.plugins.routes`), with the task instance tab's.

Airflow mounts plugin apps without applying authentication, so every route depends on Airflow's
own :func:`~airflow.api_fastapi.core_api.security.get_user` (bearer token or the UI's cookie: 401
without one) and the API routes additionally ask the auth manager whether the user may read each
connection the request names, with the connection's team when ``[core] multi_team`` is on (403
otherwise): what a connection reaches is shown only to those allowed to read the connection. Links
to task instances are given only for DAGs whose task instances the user may read. All of that is the
web layer's (:mod:`~airflow_provider_eh.plugins.web`).

Every answer is scrubbed of the named connections' secrets and of what Airflow's secrets masker
holds (:mod:`~airflow_provider_eh.plugins.redaction`); failures name what was read and what to
check, never an error's raw text. Pages and links are built from ``[api] base_url``'s path, so the
view works when Airflow is served under a sub-path.
"""

# No ``from __future__ import annotations``: FastAPI reads the routes' annotations at run time.

import html
from pathlib import Path

from fastapi import APIRouter, FastAPI, HTTPException, status
from fastapi.responses import FileResponse, HTMLResponse

from airflow_provider_eh.plugins.routes import consumers, discovery, history, overview, tab, trends
from airflow_provider_eh.plugins.urls import URL_PREFIX, base_path
from airflow_provider_eh.plugins.web import new_router

STATIC = Path(__file__).with_name("static")
#: the page's own static files, served at ``static/<name>``
STATIC_FILES = frozenset({"view.js", "view.css", "format.js", "dom.js", "charts.js"})


def render_page(base: str) -> str:
    """The view's page for an Airflow served at ``base`` (a path ending in ``/``): every URL in it starts there."""
    view = f"{base}{URL_PREFIX.strip('/')}/"
    return (
        (STATIC / "view.html").read_text()
        .replace("{{ airflow_base }}", html.escape(base, quote=True))
        .replace("{{ view_base }}", html.escape(view, quote=True))
    )


pages = new_router()


@pages.get("/", response_class=HTMLResponse)
def page() -> HTMLResponse:
    """The view's page, its URLs under Airflow's base path."""
    return HTMLResponse(render_page(base_path()))


@pages.get("/static/{name}")
def static(name: str) -> FileResponse:
    """One of the page's scripts or its style (404 for any other name)."""
    if name not in STATIC_FILES:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no static file {name!r}")
    return FileResponse(STATIC / name, media_type="text/javascript" if name.endswith(".js") else "text/css")


#: the app's routers, in the order their routes are matched
ROUTERS: tuple[APIRouter, ...] = (pages, tab.router, overview.router, history.router, consumers.router,
                                  discovery.router, trends.router)


def create_app() -> FastAPI:
    """The view's FastAPI app: the page and its static files, the tab's, and the JSON API."""
    app = FastAPI(title="Event Hubs view", docs_url=None, redoc_url=None, openapi_url=None)
    for router in ROUTERS:
        app.include_router(router)
    return app
