"""The view's web layer, one for the Event Hubs view and the task instance tab: who asks, which connections they
may read, and answers with no secret in them.

Every route of both takes its user from Airflow's ``get_user`` (401 without one, :func:`user_dependency`), checks
the auth manager's permission to read each connection it will use (:func:`check_connections`; 403 naming the
connection, per team where ``[core] multi_team`` is on), and answers through :func:`answer`: a failure in words
fit to show, and every answer scrubbed of the secrets of the connections read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fastapi import HTTPException, status

from airflow_provider_eh.errors import ViewReadError
from airflow_provider_eh.plugins.readers.reading import Reading
from airflow_provider_eh.plugins.redaction import log_failure, scrub


def user_dependency() -> Any:
    """Airflow's ``get_user``, the FastAPI dependency of every route (imported when the app is made)."""
    from airflow.api_fastapi.core_api.security import get_user

    return get_user


def auth_manager() -> Any:
    """The API server's auth manager."""
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager()


def connection_teams(conn_ids: Iterable[str]) -> dict[str, str | None]:
    """``conn_id -> team`` (all ``None`` unless ``[core] multi_team`` is on), as Airflow's connection routes check."""
    from airflow.configuration import conf

    if not conf.getboolean("core", "multi_team", fallback=False):
        return dict.fromkeys(conn_ids)
    from airflow.models.connection import Connection

    return {conn_id: Connection.get_team_name(conn_id) for conn_id in conn_ids}


def readable_connections(manager: Any, user: Any, conn_ids: Iterable[str]) -> list[str]:
    """Those of ``conn_ids`` the user may read, in their order."""
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails

    return [conn_id for conn_id, team in connection_teams(conn_ids).items()
            if manager.is_authorized_connection(method="GET", user=user,
                                                details=ConnectionDetails(conn_id=conn_id, team_name=team))]


def check_connections(manager: Any, user: Any, conn_ids: Iterable[str]) -> None:
    """403 naming the first of ``conn_ids`` the user may not read."""
    wanted = list(dict.fromkeys(conn_ids))
    readable = set(readable_connections(manager, user, wanted))
    refused = next((conn_id for conn_id in wanted if conn_id not in readable), None)
    if refused is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"not allowed to read connection {refused!r}")


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
