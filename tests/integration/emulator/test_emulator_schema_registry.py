"""The local endpoint's Schema Registry, driven by Microsoft's unmodified ``azure-schemaregistry`` client and encoders.

One endpoint for the module: HTTPS with a private CA's certificate, ``--require-auth``, and schema
groups of each format and compatibility mode. The clients are built by the provider's
``SchemaRegistryHook`` from an ``azure_event_hubs`` connection (``UseDevelopmentEmulator=true``,
``schema_registry_namespace``, ``ca_bundle``); the decoding process builds its own from the hook's
endpoint, pickled (what a Spark executor gets), without Airflow.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from azure.eventhub import EventData
from azure.schemaregistry import SchemaFormat, SchemaRegistryClient
from azure.schemaregistry.encoder.avroencoder import AvroEncoder
from azure.schemaregistry.encoder.jsonencoder import JsonSchemaEncoder

from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from eventhubs_local import EmulatorProcess
from eventhubs_local.auth import sign
from tests.conftest import connection_env
from tests.support.tls import Certificates, make_certificates

KEY_NAME, KEY = "RootManageSharedAccessKey", "registry-test-key"
READER, READER_KEY = "reader", "reader-key"
CONN_ID, READER_CONN_ID = "schema_registry_test", "schema_registry_reader"
GROUPS = {"plain": ("Avro", "None"), "orders": ("Avro", "Backward"), "events": ("Json", "None")}


def record(*fields: dict[str, Any], name: str = "Order") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "com.example", "fields": list(fields)})


ORDER_V1 = record({"name": "order_id", "type": "long"}, {"name": "amount", "type": "int"},
                  {"name": "note", "type": "string"})


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("registry-tls"))


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates) -> Iterator[EmulatorProcess]:
    data = tmp_path_factory.mktemp("registry")
    with EmulatorProcess(data, key_name=KEY_NAME, key=KEY, require_auth=True, registry_port=0,
                         tls=(certificates.cert, certificates.key), schema_groups=GROUPS, websocket_port=None,
                         sas_rules={READER: (READER_KEY, ["Listen"])}) as endpoint:
        yield endpoint


@pytest.fixture
def conns(registry: EmulatorProcess, certificates: Certificates, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The main key's connection and a Listen-only rule's, as AIRFLOW_CONN_* variables."""
    for conn_id, rule in ((CONN_ID, None), (READER_CONN_ID, READER)):
        name, value = connection_env(conn_id, "azure_event_hubs", extra={
            "connection_string": registry.connection_string(rule=rule),
            "schema_registry_namespace": registry.registry_namespace, "ca_bundle": str(certificates.ca)})
        monkeypatch.setenv(name, value)
    return {"main": CONN_ID, "reader": READER_CONN_ID}


@pytest.fixture
def client(conns: dict[str, str]) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryHook(conns["main"]).get_client() as sr_client:
        yield sr_client


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def versions(sr_client: SchemaRegistryClient, group: str, name: str) -> list[int]:
    # the data plane's list-versions operation; this client release generates it without a public wrapper
    return list(sr_client._generated_client.list_schema_versions(group, name))  # noqa: SLF001


def test_register_get_by_id_get_id_by_definition_and_list_versions(client: SchemaRegistryClient) -> None:
    name = unique("order")
    first = client.register_schema("plain", name, ORDER_V1, SchemaFormat.AVRO)
    assert (first.group_name, first.name, first.version, first.format) == ("plain", name, 1, SchemaFormat.AVRO)
    assert len(first.id) == 32
    # the same definition again, whitespace and key order aside: the same version, no new one
    spaced = json.dumps(json.loads(ORDER_V1), indent=4, sort_keys=True)
    assert client.register_schema("plain", name, spaced, "Avro").id == first.id
    v2 = record({"name": "order_id", "type": "long"})
    second = client.register_schema("plain", name, v2, "Avro")
    assert second.version == 2 and second.id != first.id

    fetched = client.get_schema(first.id)
    assert fetched.definition == ORDER_V1
    assert (fetched.properties.id, fetched.properties.version, fetched.properties.format) == (first.id, 1, SchemaFormat.AVRO)
    assert client.get_schema(group_name="plain", name=name, version=2).definition == v2
    assert client.get_schema_properties("plain", name, ORDER_V1, "Avro").id == first.id
    assert client.get_schema_properties("plain", name, v2, "Avro").version == 2
    assert versions(client, "plain", name) == [1, 2]
    with pytest.raises(ResourceNotFoundError) as missing:
        client.get_schema_properties("plain", name, record({"name": "other", "type": "int"}), "Avro")
    assert missing.value.error.code == "ItemNotFound"
    with pytest.raises(ResourceNotFoundError):
        client.get_schema(uuid.uuid4().hex)


def test_avro_encoder_output_decodes_in_another_process(client: SchemaRegistryClient, conns: dict[str, str],
                                                        tmp_path: Path) -> None:
    encoder = AvroEncoder(client=client, group_name="plain", auto_register=True)
    name = unique("Payment")
    schema = record({"name": "payment_id", "type": "string"}, {"name": "cents", "type": "long"},
                    {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD"]}},
                    name=name.replace("-", "_"))
    value = {"payment_id": "p-17", "cents": 12_345, "currency": "EUR"}
    event = encoder.encode(value, schema=schema, message_type=EventData)
    assert isinstance(event, EventData)
    prefix, _, schema_id = event.content_type.partition("+")
    assert prefix == "avro/binary"
    registered = client.get_schema(schema_id)
    assert registered.definition == schema and registered.properties.group_name == "plain"
    content = encoder.encode(value, schema=schema)  # a MessageContent: the same id, the encoder caches it
    assert content["content_type"] == event.content_type

    # the other process gets the endpoint the hook built, pickled, as a Spark executor or a worker would
    endpoint = tmp_path / "endpoint.pickle"
    endpoint.write_bytes(pickle.dumps(SchemaRegistryHook(conns["reader"]).get_endpoint()))
    body = tmp_path / "event.bin"
    body.write_bytes(b"".join(event.body))
    decoder = (
        "import json, pickle, sys\n"
        "from azure.schemaregistry.encoder.avroencoder import AvroEncoder\n"
        "with pickle.loads(open(sys.argv[1], 'rb').read()).client() as client:\n"
        "    encoder = AvroEncoder(client=client)\n"
        "    content = {'content': open(sys.argv[2], 'rb').read(), 'content_type': sys.argv[3]}\n"
        "    print(json.dumps(encoder.decode(content)))\n"
    )
    done = subprocess.run([sys.executable, "-c", decoder, str(endpoint), str(body), event.content_type],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == value


def test_the_async_client_and_encoder_read_what_the_sync_ones_wrote(client: SchemaRegistryClient,
                                                                    conns: dict[str, str]) -> None:
    from azure.schemaregistry.encoder.avroencoder.aio import AvroEncoder as AsyncAvroEncoder

    name = unique("Refund").replace("-", "_")
    schema = record({"name": "refund_id", "type": "string"}, name=name)
    content = AvroEncoder(client=client, group_name="plain", auto_register=True).encode({"refund_id": "r-1"},
                                                                                       schema=schema)
    endpoint = SchemaRegistryHook(conns["reader"]).get_endpoint()

    async def read() -> tuple[Any, Any]:
        async with endpoint.async_client() as aclient:
            fetched = await aclient.get_schema(content["content_type"].split("+", 1)[1])
            return fetched.definition, await AsyncAvroEncoder(client=aclient).decode(content)

    definition, decoded = asyncio.run(read())
    assert definition == schema and decoded == {"refund_id": "r-1"}


def test_backward_group_refuses_an_incompatible_version_naming_the_fields(client: SchemaRegistryClient) -> None:
    name = unique("order")
    assert client.register_schema("orders", name, ORDER_V1, "Avro").version == 1
    incompatible = record({"name": "order_id", "type": "long"}, {"name": "amount", "type": "string"},
                          {"name": "customer", "type": "string"})
    with pytest.raises(HttpResponseError) as refused:
        client.register_schema("orders", name, incompatible, "Avro")
    assert refused.value.status_code == 400 and refused.value.error.code == "InvalidSchema"
    message = refused.value.error.message
    assert "not backward compatible" in message
    assert "'Order.customer' is added without a default" in message
    assert "'Order.amount': type int cannot be read as string" in message
    assert versions(client, "orders", name) == [1]
    # what backward compatibility allows: a field added with a default, a promotion, a field removed
    compatible = record({"name": "order_id", "type": "long"}, {"name": "amount", "type": "double"},
                        {"name": "customer", "type": ["null", "string"], "default": None})
    assert client.register_schema("orders", name, compatible, "Avro").version == 2


def test_forward_group_refuses_a_version_old_readers_cannot_read(registry: EmulatorProcess,
                                                                   client: SchemaRegistryClient) -> None:
    group = unique("forward")
    registry.admin.create_schema_group(group, "Avro", "Forward")
    name = unique("order")
    client.register_schema(group, name, ORDER_V1, "Avro")
    without_note = record({"name": "order_id", "type": "long"}, {"name": "amount", "type": "int"})
    with pytest.raises(HttpResponseError) as refused:
        client.register_schema(group, name, without_note, "Avro")
    assert "not forward compatible" in refused.value.error.message
    assert "'Order.note' is added without a default" in refused.value.error.message
    added = record({"name": "order_id", "type": "long"}, {"name": "amount", "type": "int"},
                   {"name": "note", "type": "string"}, {"name": "channel", "type": "string"})
    assert client.register_schema(group, name, added, "Avro").version == 2
    described = next(g for g in registry.admin.schema_groups() if g["name"] == group)
    assert described["compatibility"] == "Forward" and described["schemas"] == {name: [1, 2]}


def test_missing_group_wrong_format_and_bad_schema_fail_as_the_service_does(client: SchemaRegistryClient) -> None:
    with pytest.raises(ResourceNotFoundError) as missing:
        client.register_schema("no-such-group", "order", ORDER_V1, "Avro")
    assert missing.value.status_code == 404 and missing.value.error.code == "ItemNotFound"
    assert "no-such-group" in missing.value.error.message
    with pytest.raises(HttpResponseError) as wrong_format:
        client.register_schema("events", "order", ORDER_V1, "Avro")
    assert wrong_format.value.status_code == 415 and wrong_format.value.error.code == "InvalidSchemaType"
    assert "holds Json schemas" in wrong_format.value.error.message
    with pytest.raises(HttpResponseError) as bad:
        client.register_schema("plain", "order", json.dumps({"type": "record", "name": "X", "fields": [
            {"name": "a", "type": "no-such-type"}]}), "Avro")
    assert bad.value.status_code == 400 and "unknown type 'no-such-type'" in bad.value.error.message


def test_json_schema_group_serves_microsofts_json_encoder(client: SchemaRegistryClient) -> None:
    title = unique("Shipment")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, "type": "object",
              "properties": {"id": {"type": "integer"}, "city": {"type": "string"}}, "required": ["id"]}
    props = client.register_schema("events", title, json.dumps(schema), SchemaFormat.JSON)
    assert props.format == SchemaFormat.JSON and props.version == 1
    fetched = client.get_schema(props.id)
    assert fetched.properties.format == SchemaFormat.JSON and json.loads(fetched.definition) == schema
    encoder = JsonSchemaEncoder(client=client, validate=schema["$schema"], group_name="events")
    content = encoder.encode({"id": 7, "city": "Lyon"}, schema=json.dumps(schema))
    assert content["content_type"].endswith("+" + props.id)
    assert encoder.decode(content) == {"id": 7, "city": "Lyon"}


class _Token:
    """A ``TokenCredential`` that hands out a fixed token."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)


def test_missing_or_invalid_tokens_are_refused_with_401(registry: EmulatorProcess, certificates: Certificates,
                                                        client: SchemaRegistryClient, conns: dict[str, str]) -> None:
    name = unique("order")
    schema_id = client.register_schema("plain", name, ORDER_V1, "Avro").id
    url = f"https://{registry.registry_namespace}/$schemaGroups/$schemas/{schema_id}?api-version=2022-10"
    import ssl

    context = ssl.create_default_context(cafile=str(certificates.ca))
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(url, context=context, timeout=10)
    assert anonymous.value.code == 401
    assert json.loads(anonymous.value.read())["error"]["message"].startswith("Unauthorized")

    audience = f"https://{registry.registry_namespace}/"
    expiry = int(time.time()) + 600
    refusals = {
        "wrong key": sign(audience, KEY_NAME, "not-the-key", expiry),
        "expired": sign(audience, KEY_NAME, KEY, int(time.time()) - 5),
        "a hub's token": sign(f"sb://{registry.host}:{registry.port}/orders", KEY_NAME, KEY, expiry),
        "not a SAS token": "eyJhbGciOiJub25lIn0.e30.",
    }
    for what, token in refusals.items():
        with SchemaRegistryClient(registry.registry_namespace, _Token(token), connection_verify=str(certificates.ca),
                                  retry_total=0) as bad:
            with pytest.raises(ClientAuthenticationError) as info:
                bad.get_schema(schema_id)
            assert info.value.status_code == 401, what
    with SchemaRegistryClient(registry.registry_namespace, _Token(sign(audience, KEY_NAME, KEY, expiry)),
                              connection_verify=str(certificates.ca)) as good:
        assert good.get_schema(schema_id).properties.id == schema_id
    # a Listen-only key reads, and cannot register
    with SchemaRegistryHook(conns["reader"]).get_client(retry_total=0) as reader:
        assert reader.get_schema(schema_id).definition == ORDER_V1
        with pytest.raises(ClientAuthenticationError) as denied:
            reader.register_schema("plain", unique("order"), ORDER_V1, "Avro")
    assert "'Manage' claim(s) are required" in denied.value.error.message


def test_schemas_survive_a_restart(registry: EmulatorProcess, conns: dict[str, str]) -> None:
    with SchemaRegistryHook(conns["main"]).get_client() as before:
        name = unique("order")
        props = before.register_schema("orders", name, ORDER_V1, "Avro")
    registry.restart()
    with SchemaRegistryHook(conns["main"]).get_client() as after:
        assert after.get_schema(props.id).definition == ORDER_V1
        assert after.register_schema("orders", name, ORDER_V1, "Avro").id == props.id
        # the group's compatibility mode is kept too
        with pytest.raises(HttpResponseError, match="not backward compatible"):
            after.register_schema("orders", name, record({"name": "extra", "type": "int"}), "Avro")
