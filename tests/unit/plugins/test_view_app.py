"""The Event Hubs view's app: URLs under Airflow's base path, connection access with teams, the off switch,
and failures that never repeat an error's text."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from airflow_provider_eh.plugins import app as view_app
from airflow_provider_eh.plugins import event_hubs_view, redaction

STATIC = view_app.STATIC


def _urls(page: str) -> list[str]:
    return re.findall(r'(?:href|src|content)="([^"]*)"', page)


def test_the_page_and_its_links_start_at_airflows_base_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/team-a/airflow")
    assert event_hubs_view.base_path() == "/team-a/airflow/"
    page = view_app.render_page(event_hubs_view.base_path())
    assert _urls(page) == ["/team-a/airflow/", "/team-a/airflow/eventhubs/", "/team-a/airflow/eventhubs/static/view.css",
                           "/team-a/airflow/eventhubs/static/format.js", "/team-a/airflow/eventhubs/static/dom.js",
                           "/team-a/airflow/eventhubs/static/charts.js",
                           "/team-a/airflow/eventhubs/static/view.js"]
    assert event_hubs_view._external_views()[0]["href"] == "/team-a/airflow/eventhubs/"
    for name in ("charts.js", "view.js"):
        script = (STATIC / name).read_text()
        # every URL the script builds starts at the page's base paths: no absolute path of its own
        assert not re.findall(r'"/(?:dags|eventhubs|api)', script), name
    assert 'AIRFLOW + "dags/"' in script and 'VIEW + "api/overview"' in script and 'VIEW + "api/consumers"' in script
    assert 'VIEW + "api/connections"' in script and 'VIEW + "api/hubs"' in script


def test_without_a_base_path_everything_starts_at_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://127.0.0.1:8080")
    assert event_hubs_view.base_path() == "/"
    assert _urls(view_app.render_page("/"))[:2] == ["/", "/eventhubs/"]
    assert event_hubs_view._external_views()[0]["href"] == "/eventhubs/"


SIMPLE_USERS_HAVE_TEAMS = "teams" in inspect.signature(
    __import__("airflow.api_fastapi.auth.managers.simple.user", fromlist=["SimpleAuthManagerUser"]).SimpleAuthManagerUser
).parameters


@pytest.fixture
def client_as(monkeypatch: pytest.MonkeyPatch):
    """A test client of the view's app, authenticated as the given simple-auth-manager user."""
    from airflow.api_fastapi.app import create_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.api_fastapi.core_api.security import get_user

    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER",
                       "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager")
    create_auth_manager()

    def make(role: str, teams: list[str] | None = None) -> TestClient:
        app = view_app.create_app()
        user = SimpleAuthManagerUser(username="u", role=role, **({"teams": teams} if SIMPLE_USERS_HAVE_TEAMS else {}))
        app.dependency_overrides[get_user] = lambda: user
        return TestClient(app)

    return make


def test_in_multi_team_mode_the_connections_team_decides_access(client_as, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.models.connection import Connection

    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    monkeypatch.setattr(Connection, "get_team_name", staticmethod(lambda conn_id, **_: {"eh_fin": "finance"}.get(conn_id)))
    fin = client_as("op", ["sales"]).get("/api/consumers", params={"conn_id": "eh_fin"})
    if SIMPLE_USERS_HAVE_TEAMS:
        assert fin.status_code == 403 and "eh_fin" in fin.json()["detail"]
    else:  # Airflow 3.1's simple auth manager knows no teams: the role decides, the read fails on the missing connection
        assert fin.status_code == 404 and "eh_fin" in fin.json()["detail"], fin.text
    # the same user may read a connection of no team: the check passes and the read fails on the missing connection
    allowed = client_as("op", ["sales"]).get("/api/consumers", params={"conn_id": "eh_none_defined"})
    assert allowed.status_code == 404, allowed.text
    assert "eh_none_defined" in allowed.json()["detail"] and "not defined" in allowed.json()["detail"]
    assert client_as("viewer", ["finance"]).get("/api/consumers", params={"conn_id": "eh_fin"}).status_code == 403


def test_view_enabled_is_declared_provider_configuration_listed_by_airflow() -> None:
    from airflow_provider_eh.get_provider_info import get_provider_info

    option = get_provider_info()["config"]["azure_event_hubs"]["options"]["view_enabled"]
    assert (option["type"], option["default"]) == ("boolean", "True")
    command = [sys.executable, "-m", "airflow", "config", "list", "--section", "azure_event_hubs"]
    usage = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=120).stdout
    if "--show-values" in usage:  # Airflow 3.2+ lists values only when asked; 3.1 always does
        command.append("--show-values")
    listed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "[azure_event_hubs]" in listed.stdout and re.search(r"^view_enabled = True$", listed.stdout, re.M), listed.stdout


def test_a_failed_read_names_what_failed_and_why_but_never_repeats_the_errors_text() -> None:
    from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError
    from azure.eventhub.exceptions import AuthenticationError

    from airflow_provider_eh.errors import ConnectionUnreachableError

    signature = "sig=Zm9vYmFyYmF6cXV4-do-not-show"
    refused = ClientAuthenticationError(f"Server failed to authenticate the request. {signature}")
    message = redaction.failure("listing producer states in container 'state'", refused, "Check the key.").message
    assert signature not in message and "Zm9vYmFy" not in message
    assert message.startswith("listing producer states in container 'state': the credentials were refused (ClientAuthenticationError).")
    wrapped = ConnectionUnreachableError("eh", f"cannot read: {signature}")
    wrapped.__cause__ = AuthenticationError(f"CBS token refused: {signature}")
    message = redaction.failure("reading the partitions", wrapped, "").message
    assert signature not in message and "the credentials were refused (AuthenticationError)" in message
    assert redaction.reason_of(ResourceNotFoundError("The specified container does not exist.")) == "not found"
    assert redaction.reason_of(ValueError(signature)) == "the read failed"


def test_every_string_of_an_answer_is_scrubbed_of_the_connections_secrets() -> None:
    key, account_key = "EhKey-4f1c9e2a-distinctive", "QWNjb3VudEtleS1kaXN0aW5jdGl2ZQ=="
    eh = SimpleNamespace(password=None, extra_dejson={
        "connection_string": f"Endpoint=sb://ns/;SharedAccessKeyName=send;SharedAccessKey={key};EntityPath=orders"})
    wasb = SimpleNamespace(password="client-secret-value", extra_dejson={
        "connection_string": f"AccountName=acct;AccountKey={account_key};BlobEndpoint=http://x", "tenant_id": "tenant"})
    malformed = SimpleNamespace(password=None, extra_dejson={"connection_string": "Endpoint=sb://ns/;PastedKeyWithoutName"})
    secrets = redaction.connection_secrets(eh) | redaction.connection_secrets(wasb) | redaction.connection_secrets(malformed)
    assert {key, account_key, "client-secret-value", "PastedKeyWithoutName"} <= secrets and "tenant" not in secrets
    answer = {"detail": f"failed with {key}", "rows": [{"error": f"AccountKey={account_key}"}, 3, None],
              "nested": {"ok": "partition 3", "also": "PastedKeyWithoutName and client-secret-value"}}
    scrubbed = redaction.scrub(answer, secrets)
    text = repr(scrubbed)
    assert all(secret not in text for secret in secrets)
    assert scrubbed["nested"]["ok"] == "partition 3" and scrubbed["rows"][1:] == [3, None]
