"""Who may read what the view shows: the auth manager's answer for connections, DAGs' task instances and Variables.

Each is asked as Airflow's own routes ask it: with ``method="GET"``, the resource's details and, when
``[core] multi_team`` is on, the resource's team (``None`` otherwise). One loop serves the three
kinds (:func:`readable`, :func:`reader`); a kind is the model that knows a resource's team and the auth manager's
question about it (:data:`CONNECTION`, :data:`DAG_TASK_INSTANCES`, :data:`VARIABLE`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    """A kind of resource: how to find one's team, and how to ask the auth manager whether a user may read one."""

    team_of: Callable[[str], str | None]
    ask: Callable[[Any, Any, str, str | None], bool]  # (manager, user, id, team) -> may read


def _connection_team(conn_id: str) -> str | None:
    from airflow.models.connection import Connection

    return Connection.get_team_name(conn_id)


def _ask_connection(manager: Any, user: Any, conn_id: str, team: str | None) -> bool:
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails

    return bool(manager.is_authorized_connection(method="GET", user=user,
                                                 details=ConnectionDetails(conn_id=conn_id, team_name=team)))


def _dag_team(dag_id: str) -> str | None:
    from airflow.models.dag import DagModel

    return DagModel.get_team_name(dag_id)


def _ask_dag_task_instances(manager: Any, user: Any, dag_id: str, team: str | None) -> bool:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    return bool(manager.is_authorized_dag(method="GET", access_entity=DagAccessEntity.TASK_INSTANCE,
                                          details=DagDetails(id=dag_id, team_name=team), user=user))


def _variable_team(key: str) -> str | None:
    from airflow.models.variable import Variable

    return Variable.get_team_name(key)


def _ask_variable(manager: Any, user: Any, key: str, team: str | None) -> bool:
    from airflow.api_fastapi.auth.managers.models.resource_details import VariableDetails

    return bool(manager.is_authorized_variable(method="GET", details=VariableDetails(key=key, team_name=team), user=user))


CONNECTION = Kind(_connection_team, _ask_connection)
DAG_TASK_INSTANCES = Kind(_dag_team, _ask_dag_task_instances)
VARIABLE = Kind(_variable_team, _ask_variable)


def multi_team() -> bool:
    """Whether ``[core] multi_team`` is on: resources are then asked about with their team."""
    from airflow.configuration import conf

    return conf.getboolean("core", "multi_team", fallback=False)


def teams(kind: Kind, ids: Iterable[str]) -> dict[str, str | None]:
    """``id -> team`` of resources of ``kind`` (all ``None`` unless ``[core] multi_team`` is on), in their order."""
    if not multi_team():
        return dict.fromkeys(ids)
    return {resource_id: kind.team_of(resource_id) for resource_id in ids}


def readable(kind: Kind, manager: Any, user: Any, teams: Mapping[str, str | None]) -> list[str]:
    """Those of the resources (``id -> team``) of ``kind`` the user may read, in their order, each asked once."""
    return [resource_id for resource_id, team in teams.items() if kind.ask(manager, user, resource_id, team)]


def reader(kind: Kind, manager: Any, user: Any) -> Callable[[str], bool]:
    """Whether the user may read one resource of ``kind``, asked resource by resource (``[core] multi_team`` read once)."""
    with_teams = multi_team()

    def may_read(resource_id: str) -> bool:
        return kind.ask(manager, user, resource_id, kind.team_of(resource_id) if with_teams else None)

    return may_read
