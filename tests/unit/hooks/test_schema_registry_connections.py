"""An ``azure_event_hubs`` connection becomes a Schema Registry endpoint: address, credential kind, CA, errors."""

from __future__ import annotations

import asyncio
import json
import pickle
import time
from urllib.parse import parse_qs

import pytest
from eventhubs_local.auth import SasValidator

from airflow_provider_eh.client.schema_registry import SharedAccessKeyCredential
from airflow_provider_eh.errors import ConnectionConfigError
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook

LOCAL = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=root;SharedAccessKey=local-secret;UseDevelopmentEmulator=true"
AZURE = "Endpoint=sb://MyNs.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=azure-secret"


def _set(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "azure_event_hubs", **fields}))


def test_local_endpoint_signs_namespace_tokens_its_validator_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "sr", extra={"connection_string": LOCAL, "schema_registry_namespace": "https://127.0.0.1:5681/",
                                   "ca_bundle": "/tmp/ca.pem"})
    endpoint = SchemaRegistryHook("sr").get_endpoint()
    assert (endpoint.fully_qualified_namespace, endpoint.credential_kind) == ("127.0.0.1:5681", "shared_access_key")
    assert endpoint.client_kwargs({}) == {"connection_verify": "/tmp/ca.pem"}
    assert "local-secret" not in repr(endpoint) and "local-secret" not in repr(endpoint.credential())
    token = endpoint.credential().get_token("https://eventhubs.azure.net/.default")
    assert token.expires_on > time.time() + 3000
    fields = parse_qs(token.token.split(" ", 1)[1])
    assert fields["sr"] == ["https://127.0.0.1:5681/"] and fields["skn"] == ["root"]
    assert SasValidator("root", "local-secret").namespace_rights(token.token) == frozenset({"Send", "Listen", "Manage"})
    assert pickle.loads(pickle.dumps(endpoint)) == endpoint  # what another process or a Spark executor gets
    async_token = asyncio.run(endpoint.credential(aio=True).get_token("scope"))
    assert parse_qs(async_token.token.split(" ", 1)[1])["sr"] == ["https://127.0.0.1:5681/"]


def test_local_endpoint_without_the_registry_address_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "sr", extra={"connection_string": LOCAL})
    with pytest.raises(ConnectionConfigError, match=r"Connection 'sr': .*'schema_registry_namespace' is empty.*--|"
                                                    r"Connection 'sr': .*'schema_registry_namespace' is empty"):
        SchemaRegistryHook("sr").get_endpoint()


def test_azure_connection_string_uses_entra_tokens_at_the_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "sr", extra={"connection_string": AZURE, "managed_identity_client_id": "mi-1"})
    endpoint = SchemaRegistryHook("sr").get_endpoint()
    assert (endpoint.fully_qualified_namespace, endpoint.credential_kind) == ("myns.servicebus.windows.net",
                                                                                "default_azure_credential")
    assert endpoint.managed_identity_client_id == "mi-1" and endpoint.key is None


def test_service_principal_and_its_missing_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "sp", host="ns.servicebus.windows.net", login="app", password="pw-secret",
         extra={"tenant_id": "t-1"})
    endpoint = SchemaRegistryHook("sp").get_endpoint()
    assert (endpoint.credential_kind, endpoint.client_id, endpoint.tenant_id) == ("client_secret", "app", "t-1")
    assert "pw-secret" not in repr(endpoint)
    _set(monkeypatch, "sp_no_tenant", host="ns.servicebus.windows.net", login="app", password="pw")
    with pytest.raises(ConnectionConfigError, match=r"Connection 'sp_no_tenant': .*tenant_id"):
        SchemaRegistryHook("sp_no_tenant").get_endpoint()
    _set(monkeypatch, "empty")
    with pytest.raises(ConnectionConfigError, match=r"Connection 'empty': set the host"):
        SchemaRegistryHook("empty").get_endpoint()


def test_a_presigned_signature_is_handed_out_until_its_expiry() -> None:
    credential = SharedAccessKeyCredential("https://h/", signature="SharedAccessSignature sr=x&sig=y&se=1900000000&skn=k")
    token = credential.get_token("scope")
    assert token.token.endswith("skn=k") and token.expires_on == 1900000000
    with pytest.raises(ValueError, match="SharedAccessKeyName and SharedAccessKey"):
        SharedAccessKeyCredential("https://h/")
