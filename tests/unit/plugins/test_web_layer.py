"""The web layer's authorisation, shared by the view and the tab: which connections a user may read, and the 403
that names the first one refused (the auth manager a simple fake: its decisions are Airflow's)."""

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
