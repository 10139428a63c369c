"""The web layer's authorisation, shared by the view and the tab: which connections, DAGs and Variables a user may
read, with their teams under ``[core] multi_team``, the 403 that names the first one refused (the auth manager a
simple fake: its decisions are Airflow's), and no route of the view without Airflow's user."""

from __future__ import annotations

import pytest
from fastapi import HTTPException

from airflow_provider_eh.plugins.web import check_connections, readable_connections


class Manager:
    """Allows reading the connections it is given, and records what it was asked."""

    def __init__(self, allowed: set[str]):
        self.allowed = allowed
        self.asked: list[tuple[str, str | None, str]] = []

    def is_authorized_connection(self, *, method: str, user: object, details: object) -> bool:
        self.asked.append((details.conn_id, details.team_name, method))  # type: ignore[attr-defined]
        return details.conn_id in self.allowed  # type: ignore[attr-defined]


def test_readable_connections_keep_their_order_and_each_is_asked_once_for_reading() -> None:
    manager = Manager({"eh", "blob"})
    assert readable_connections(manager, "alice", ["eh", "sql", "blob", "eh"]) == ["eh", "blob"]
    assert manager.asked == [("eh", None, "GET"), ("sql", None, "GET"), ("blob", None, "GET")]


def test_a_refused_connection_is_a_403_naming_the_first_one() -> None:
    check_connections(Manager({"eh", "blob"}), "alice", ["eh", "blob"])
    with pytest.raises(HTTPException) as refused:
        check_connections(Manager({"eh"}), "alice", ["eh", "sql", "blob"])
    assert refused.value.status_code == 403 and refused.value.detail == "not allowed to read connection 'sql'"


class Everything:
    """Allows what is named ``ok...``, of any kind, and records each question with the resource's team."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str | None]] = []

    def is_authorized_connection(self, *, method: str, user: object, details: object) -> bool:
        return self._ask("connection", details.conn_id, details.team_name)  # type: ignore[attr-defined]

    def is_authorized_dag(self, *, method: str, access_entity: object, details: object, user: object) -> bool:
        assert str(access_entity) == "DagAccessEntity.TASK_INSTANCE"
        return self._ask("dag", details.id, details.team_name)  # type: ignore[attr-defined]

    def is_authorized_variable(self, *, method: str, details: object, user: object) -> bool:
        return self._ask("variable", details.key, details.team_name)  # type: ignore[attr-defined]

    def _ask(self, kind: str, name: str, team: str | None) -> bool:
        self.asked.append((kind, name, team))
        return name.startswith("ok")


def test_under_multi_team_connections_dags_and_variables_are_each_asked_with_their_team(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.models.connection import Connection
    from airflow.models.dag import DagModel
    from airflow.models.variable import Variable

    from airflow_provider_eh.plugins.web import Access

    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    for model in (Connection, DagModel, Variable):
        monkeypatch.setattr(model, "get_team_name", staticmethod(lambda name, **_: f"team of {name}"), raising=False)
    allowed = Access("alice")
    allowed.manager = manager = Everything()
    assert allowed.connections(["ok_eh", "no_sql"]) == ["ok_eh"]
    assert allowed.dags(["ok_dag", "no_dag"]) == {"ok_dag"}
    assert allowed.variable("ok_var") and not allowed.variable("no_var")
    assert manager.asked == [(kind, name, f"team of {name}") for kind, name in (
        ("connection", "ok_eh"), ("connection", "no_sql"), ("dag", "ok_dag"), ("dag", "no_dag"),
        ("variable", "ok_var"), ("variable", "no_var"))]
    for refuse, detail in ((lambda: allowed.require_connections(["ok_eh", "no_sql"]), "connection 'no_sql'"),
                           (lambda: allowed.require_dag("no_dag"), "the task instances of DAG 'no_dag'"),
                           (lambda: allowed.require_variable("no_var"), "Airflow Variable 'no_var'")):
        with pytest.raises(HTTPException) as refused:
            refuse()
        assert refused.value.status_code == 403 and refused.value.detail == f"not allowed to read {detail}"


def test_every_route_of_the_view_answers_401_to_a_request_without_a_user() -> None:
    from fastapi.routing import APIRoute
    from fastapi.testclient import TestClient

    from airflow_provider_eh.plugins.app import create_app

    app = create_app()
    paths = sorted(route.path for route in app.routes if isinstance(route, APIRoute))
    assert paths == ["/", "/api/connections", "/api/consumers", "/api/history", "/api/hubs", "/api/overview",
                     "/api/task-instance", "/api/trends", "/static/{name}", "/tab", "/tab/static/tab.js"]
    client = TestClient(app)
    for path in paths:  # the query a route needs given, so that only the missing user can refuse it
        response = client.get(path.replace("{name}", "view.js"), params={
            "conn_id": "eh", "group": "g", "partition": "0", "dag_id": "d", "run_id": "r", "task_id": "t"})
        assert response.status_code == 401, (path, response.text)
