"""Connections become endpoints and blob clients in the documented order, with clear errors."""

from __future__ import annotations

import json
import pickle

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import ConnectionConfigError
from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.hooks.event_hubs import EventHubHook

SECRET = "c2VjcmV0LWtleS12YWx1ZQ=="
CONN_STR = f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={SECRET}"


def _set(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_connection_string_with_entity_path_gives_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "eh", conn_type="azure_event_hubs", extra={"connection_string": CONN_STR + ";EntityPath=orders"})
    endpoint = EventHubHook("eh").get_endpoint()
    assert (endpoint.fully_qualified_namespace, endpoint.eventhub_name) == ("ns.servicebus.windows.net", "orders")
    assert endpoint.credential_kind == "connection_string"


def test_hub_argument_wins_over_entity_path_and_field(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(
        monkeypatch, "eh", conn_type="azure_event_hubs",
        extra={"connection_string": CONN_STR + ";EntityPath=orders", "eventhub_name": "audit"},
    )
    assert EventHubHook("eh", eventhub_name="payments").get_endpoint().eventhub_name == "payments"
    assert EventHubHook("eh").get_endpoint("clicks").eventhub_name == "clicks"


def test_prefixed_extra_fields_from_older_forms_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(
        monkeypatch, "eh", conn_type="azure_event_hubs",
        extra={"extra__azure_event_hubs__connection_string": CONN_STR, "extra__azure_event_hubs__eventhub_name": "orders"},
    )
    assert EventHubHook("eh").get_endpoint().eventhub_name == "orders"


def test_service_principal_needs_a_tenant_and_names_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "eh_sp", conn_type="azure_event_hubs", host="ns.servicebus.windows.net", login="app", password="pw",
         extra={"eventhub_name": "orders"})
    with pytest.raises(ConnectionConfigError, match=r"Connection 'eh_sp': .*tenant_id"):
        EventHubHook("eh_sp").get_endpoint()


def test_service_principal_and_default_credential_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "eh_sp", conn_type="azure_event_hubs", host="ns.servicebus.windows.net", login="app", password="pw",
         extra={"eventhub_name": "orders", "tenant_id": "t"})
    _set(monkeypatch, "eh_mi", conn_type="azure_event_hubs", host="ns.servicebus.windows.net", extra={"eventhub_name": "orders"})
    assert EventHubHook("eh_sp").get_endpoint().credential_kind == "client_secret"
    assert EventHubHook("eh_mi").get_endpoint().credential_kind == "default_azure_credential"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"extra": {}}, "set either the 'connection_string' field or the host"),
        ({"extra": {"connection_string": CONN_STR}}, "no Event Hub name"),
        ({"extra": {"connection_string": "garbage;EntityPath=x"}}, "field 'connection_string' is malformed"),
        ({"extra": {"connection_string": "SharedAccessKey=x;EntityPath=x"}}, "has no Endpoint"),
    ],
)
def test_bad_event_hubs_connection_names_connection_and_field(monkeypatch: pytest.MonkeyPatch, fields: dict, message: str) -> None:
    _set(monkeypatch, "broken_eh", conn_type="azure_event_hubs", **fields)
    with pytest.raises(ConnectionConfigError) as err:
        EventHubHook("broken_eh").get_endpoint()
    assert "Connection 'broken_eh'" in str(err.value) and message in str(err.value)


def test_endpoint_repr_and_pickle_keep_the_secret_out_of_repr() -> None:
    endpoint = EventHubsEndpoint.from_connection_string(CONN_STR, "orders")
    assert SECRET not in repr(endpoint)
    assert pickle.loads(pickle.dumps(endpoint)) == endpoint


def test_connection_secrets_are_registered_with_the_masker(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.common.compat.sdk import redact

    _set(monkeypatch, "eh", conn_type="azure_event_hubs", extra={"connection_string": CONN_STR + ";EntityPath=o"})
    EventHubHook("eh").get_endpoint()
    assert SECRET not in str(redact(f"key={SECRET}"))


@pytest.mark.parametrize(
    ("fields", "how"),
    [
        ({"extra": {"connection_string": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + SECRET}}, "connection_string"),
        ({"login": "acct", "password": SECRET}, "account_key"),
        ({"host": "https://acct.blob.core.windows.net", "extra": {"sas_token": "sv=2020&sig=abc"}}, "sas_token"),
        ({"login": "client", "password": "secret", "host": "acct.blob.core.windows.net", "extra": {"tenant_id": "t"}}, "client_secret"),
        ({"host": "https://acct.blob.core.windows.net"}, "default_azure_credential"),
    ],
)
def test_wasb_credentials_are_tried_in_the_documented_order(monkeypatch: pytest.MonkeyPatch, fields: dict, how: str) -> None:
    _set(monkeypatch, "blob", conn_type="wasb", **fields)
    hook = BlobStorageHook("blob")
    assert hook._service_kwargs(hook.get_connection("blob"), aio=False)[0] == how


def test_wasb_without_account_names_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "blob_broken", conn_type="wasb", extra={})
    hook = BlobStorageHook("blob_broken")
    with pytest.raises(ConnectionConfigError, match="Connection 'blob_broken': set 'connection_string'"):
        hook._service_kwargs(hook.get_connection("blob_broken"), aio=False)
