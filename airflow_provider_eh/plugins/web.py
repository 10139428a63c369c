"""The view's web layer, one for the Event Hubs view, its trends and the task instance tab: who asks, what they may
read, which source a request names, and answers with no secret in them.

Airflow mounts plugin apps without applying authentication, so every router is made by :func:`new_router`, whose
routes all depend on Airflow's own :func:`~airflow.api_fastapi.core_api.security.get_user` (bearer token or the
UI's cookie: 401 without one). A route that needs the user's permissions takes :data:`Permissions` (an
:class:`Access`: the auth manager's answer for connections, DAGs' task instances and Variables, with their teams
under ``[core] multi_team``, :mod:`~airflow_provider_eh.plugins.access`; 403 naming what is refused). A route that
reads a hub's state takes :data:`AuthorizedSource` (or :data:`SettledSource`): the request's source once the user
may read every connection it uses. Every route answers through :func:`answer`: a failure in words fit to show,
and every answer scrubbed of the secrets of the connections read.
"""

# No ``from __future__ import annotations``: FastAPI reads the dependencies' annotations at run time.

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, status

from airflow.api_fastapi import app as api_app
from airflow.api_fastapi.core_api.security import get_user

from airflow_provider_eh.errors import ViewReadError
from airflow_provider_eh.plugins.access import CONNECTION, DAG_TASK_INSTANCES, VARIABLE, readable, reader, teams
from airflow_provider_eh.plugins.readers.discovery import settle
from airflow_provider_eh.plugins.readers.reading import Reading, Source
from airflow_provider_eh.plugins.redaction import log_failure, scrub


def new_router() -> APIRouter:
    """A router of the view: each of its routes asks Airflow who the user is first (401 without one)."""
    return APIRouter(dependencies=[Depends(get_user)])


def auth_manager() -> Any:
    """The API server's auth manager."""
    return api_app.get_auth_manager()


def readable_connections(manager: Any, user: Any, conn_ids: Iterable[str]) -> list[str]:
    """Those of ``conn_ids`` the user may read, in their order."""
    return readable(CONNECTION, manager, user, teams(CONNECTION, conn_ids))


def check_connections(manager: Any, user: Any, conn_ids: Iterable[str]) -> None:
    """403 naming the first of ``conn_ids`` the user may not read."""
    wanted = list(dict.fromkeys(conn_ids))
    allowed = set(readable_connections(manager, user, wanted))
    refused = next((conn_id for conn_id in wanted if conn_id not in allowed), None)
    if refused is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"not allowed to read connection {refused!r}")


class Access:
    """What the user of a request may read, as the API server's auth manager says (asked for when first needed)."""

    def __init__(self, user: Any):
        self.user = user

    @cached_property
    def manager(self) -> Any:
        return auth_manager()

    def connections(self, conn_ids: Iterable[str]) -> list[str]:
        """Those of ``conn_ids`` the user may read, in their order."""
        return readable_connections(self.manager, self.user, conn_ids)

    def require_connections(self, conn_ids: Iterable[str]) -> None:
        """403 naming the first of ``conn_ids`` the user may not read."""
        check_connections(self.manager, self.user, conn_ids)

    def dags(self, dag_ids: Iterable[str]) -> set[str]:
        """Those of ``dag_ids`` whose task instances the user may read."""
        return set(readable(DAG_TASK_INSTANCES, self.manager, self.user, teams(DAG_TASK_INSTANCES, dag_ids)))

    def require_dag(self, dag_id: str) -> None:
        """403 unless the user may read the task instances of ``dag_id``."""
        if dag_id not in self.dags([dag_id]):
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"not allowed to read the task instances of DAG {dag_id!r}")

    @cached_property
    def variable(self) -> Callable[[str], bool]:
        """Whether the user may read an Airflow Variable (the Variables backend's producer states)."""
        return reader(VARIABLE, self.manager, self.user)

    def require_variable(self, key: str) -> None:
        """403 unless the user may read the Airflow Variable ``key``."""
        if not self.variable(key):
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"not allowed to read Airflow Variable {key!r}")


def request_access(user: Annotated[Any, Depends(get_user)]) -> Access:
    """The request's :class:`Access` (a FastAPI dependency)."""
    return Access(user)


Permissions = Annotated[Access, Depends(request_access)]


def request_source(
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
    """The ``Source`` that a request's query parameters describe (a FastAPI dependency)."""
    groups = tuple(g.strip() for g in (consumer_groups or "").split(",") if g.strip())
    return Source(
        event_hubs_conn_id=conn_id, eventhub_name=hub or None, wasb_conn_id=wasb_conn_id or None,
        state_container=state_container or None, checkpoint_container=checkpoint_container or None,
        consumer_groups=groups, sql_conn_id=sql_conn_id or None, sink_consumer_group=sink_consumer_group,
        sink_prefix=sink_prefix or None, lag_consumer_group=lag_consumer_group or "$Default",
    )


@dataclass(frozen=True)
class Settled:
    """A request's source with what it leaves unset filled in, and where each setting came from."""

    source: Source
    origins: dict[str, str]


def settled_source(source: Annotated[Source, Depends(request_source)], allowed: Permissions) -> Settled:
    """The request's source once the user may read its Event Hubs connection, with what it leaves unset taken from
    that connection or the configuration, and the user may read every connection it then uses (a FastAPI dependency)."""
    allowed.require_connections([source.event_hubs_conn_id])
    try:
        extras = Reading(source).connection(source.event_hubs_conn_id).extra_dejson or {}
    except ViewReadError as exc:
        raise HTTPException(exc.status_code, exc.message) from None
    settled, origins = settle(source, extras)
    allowed.require_connections(settled.connection_ids()[1:])
    return Settled(settled, origins)


SettledSource = Annotated[Settled, Depends(settled_source)]


def authorized_source(settled: SettledSource) -> Source:
    """The settled source alone (a FastAPI dependency)."""
    return settled.source


AuthorizedSource = Annotated[Source, Depends(authorized_source)]


def answer(reading: Reading, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The built answer, or the failure in words fit to show; either way scrubbed of secrets."""
    try:
        body = build()
    except ViewReadError as exc:
        raise HTTPException(exc.status_code, scrub(exc.message, reading.secrets)) from None
    except Exception as exc:
        log_failure(f"reading the state behind connection {reading.source.event_hubs_conn_id!r}", exc)
        raise HTTPException(
            status.HTTP_502_BAD_GATEWAY,
            scrub(f"reading the state behind connection {reading.source.event_hubs_conn_id!r} failed "
                  f"({type(exc).__name__}); the API server's log has the details", reading.secrets),
        ) from None
    return scrub(body, reading.secrets)
