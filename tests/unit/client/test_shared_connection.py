"""The shared connection's bookkeeping: counted users per key, the last one closes it, and handlers of an
SDK whose internals differ keep their own connections (simple fakes; the real thing is counted at the
local endpoint in tests/integration/client/test_single_connection_clients.py)."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_eh.client import connection as shared_connections


class OwnConnectionHandler:
    """A handler of another SDK layout: it opens a connection of its own and has no ``_connection``."""

    def __init__(self) -> None:
        self.opened_with: list[object] = []

    def open(self, connection: object = None) -> None:
        self.opened_with.append(connection)


def test_users_are_counted_per_key_and_the_last_release_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[shared_connections.SharedConnection] = []
    monkeypatch.setattr(shared_connections.SharedConnection, "close", lambda self: closed.append(self))
    first = shared_connections.acquire("hub-a")
    assert shared_connections.acquire("hub-a") is first and first.users == 2
    other = shared_connections.acquire("hub-b")
    assert other is not first
    shared_connections.release("hub-a", first)
    assert closed == [] and "hub-a" in shared_connections._SHARED
    shared_connections.release("hub-a", first)
    assert closed == [first] and "hub-a" not in shared_connections._SHARED
    with shared_connections.held("hub-b") as again:
        assert again is other and other.users == 2
    shared_connections.release("hub-b", other)
    assert closed == [first, other] and "hub-b" not in shared_connections._SHARED


def test_handlers_of_another_sdk_layout_keep_their_own_connections(caplog: pytest.LogCaptureFixture) -> None:
    shared = shared_connections.SharedConnection("ns/hub")
    first, second = OwnConnectionHandler(), OwnConnectionHandler()
    with caplog.at_level(logging.WARNING, logger=shared_connections.__name__):
        shared.open(first)
        shared.open(second)
    assert first.opened_with == [None] and second.opened_with == [None]  # each opened its own
    assert shared.unshared and shared.connection is None and shared.opened == 0
    assert [r.message for r in caplog.records].count(
        "ns/hub: the Event Hubs SDK's AMQP internals are not the ones a shared connection builds on; "
        "each link opens a connection of its own, as the SDK does") == 1
