"""The Schema Registry's request handling, without a socket: routes, headers, refusals and persistence."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from eventhubs_local.auth import SasValidator, sign
from eventhubs_local.registry import Registry, RegistryError
from eventhubs_local.registry_http import RegistryServer

AVRO = {"content-type": "application/json; serialization=Avro", "authorization": "Bearer anything", "host": "h:1"}
SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
Q = "?api-version=2022-10"


@pytest.fixture
def server(tmp_path: Path) -> RegistryServer:
    registry = Registry(tmp_path)
    registry.create_group("g", "avro", "backward")
    return RegistryServer(registry, "127.0.0.1", 0, ssl.create_default_context(ssl.Purpose.CLIENT_AUTH))


def refusal(server: RegistryServer, method: str, target: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, str]:
    with pytest.raises(RegistryError) as info:
        server.handle(method, target, headers, body)
    return info.value.status, info.value.code + ": " + info.value.message


def test_register_answers_the_services_headers_and_get_returns_the_definition(server: RegistryServer) -> None:
    status, body, headers = server.handle("PUT", f"/$schemaGroups/g/schemas/r{Q}", AVRO, SCHEMA.encode())
    assert (status, body) == (204, None)
    assert headers["Schema-Version"] == "1" and headers["Schema-Group-Name"] == "g" and headers["Schema-Name"] == "r"
    assert headers["Location"] == f"https://h:1/$schemagroups/g/schemas/r/versions/1{Q}"
    assert headers["Schema-Id-Location"] == f"https://h:1/$schemagroups/$schemas/{headers['Schema-Id']}{Q}"
    status, body, got = server.handle("GET", f"/$schemagroups/$schemas/{headers['Schema-Id']}{Q}", AVRO, b"")
    assert (status, body, got["Content-Type"]) == (200, SCHEMA.encode(), "application/json; serialization=Avro")
    status, body, _ = server.handle("GET", f"/$schemaGroups/g/schemas/R/versions{Q}", AVRO, b"")
    assert json.loads(body or b"") == {"Value": [1]}  # schema names are case-insensitive, as group names
    status, body, _ = server.handle("GET", f"/$schemaGroups{Q}", AVRO, b"")
    assert json.loads(body or b"") == {"Value": ["g"]}


def test_requests_the_service_refuses(server: RegistryServer) -> None:
    put = f"/$schemaGroups/g/schemas/r{Q}"
    assert refusal(server, "PUT", "/$schemaGroups/g/schemas/r", AVRO, SCHEMA.encode())[0] == 400  # no api-version
    assert refusal(server, "PUT", put, {**AVRO, "content-type": "application/xml"}, SCHEMA.encode())[0] == 415
    assert refusal(server, "PUT", put, AVRO, b"")[1].startswith("InvalidRequest")
    assert refusal(server, "PUT", put, AVRO, b"{not json")[1].startswith("InvalidSchema: Invalid Avro schema")
    assert refusal(server, "GET", f"/$schemaGroups/$schemas/xyz{Q}", AVRO)[0] == 400
    assert refusal(server, "GET", f"/$schemaGroups/g/schemas/r/versions/one{Q}", AVRO)[0] == 400
    assert refusal(server, "GET", f"/$schemaGroups/g/schemas/none/versions{Q}", AVRO)[0] == 404
    assert refusal(server, "POST", f"/$schemaGroups/g/schemas/r{Q}", AVRO, SCHEMA.encode())[0] == 405
    assert refusal(server, "GET", f"/elsewhere{Q}", AVRO)[0] == 404
    assert refusal(server, "DELETE", put, AVRO)[0] == 405
    no_token = {k: v for k, v in AVRO.items() if k != "authorization"}
    assert refusal(server, "GET", f"/$schemaGroups{Q}", no_token) == (
        401, "Unauthorized: Unauthorized: the request has no 'Authorization: Bearer <token>' header "
             "(give the client a TokenCredential)")


def test_with_keys_registering_needs_manage_and_reading_any_key(server: RegistryServer) -> None:
    server.validator = SasValidator("root", "k1", {"reader": ("k2", ["Listen"])})
    reader = {**AVRO, "authorization": "Bearer " + sign("https://h:1/", "reader", "k2", 4_000_000_000)}
    root = {**AVRO, "authorization": "SharedAccessSignature " + sign("https://h:1/$schemagroups", "root", "k1",
                                                                       4_000_000_000).split(" ", 1)[1]}
    status, message = refusal(server, "PUT", f"/$schemaGroups/g/schemas/r{Q}", reader, SCHEMA.encode())
    assert status == 401 and "'Manage' claim(s) are required" in message
    assert server.handle("PUT", f"/$schemaGroups/g/schemas/r{Q}", root, SCHEMA.encode())[0] == 204
    assert server.handle("GET", f"/$schemaGroups/g/schemas/r/versions/1{Q}", reader, b"")[0] == 200


def test_groups_and_schemas_persist_and_bad_groups_are_named(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    registry.create_group("events", "Json", "None")
    _, _, version = registry.register("events", "e", "Json", '{"type": "object"}')
    again = Registry(tmp_path)
    assert again.by_schema_id(version.id)[2].definition == '{"type": "object"}'
    assert again.group("EVENTS").format == "Json"
    with pytest.raises(ValueError, match="format 'Protobuf' is not one of Avro, Json, Custom"):
        again.create_group("p", "Protobuf")
    with pytest.raises(ValueError, match="compatibility 'Full' is not one of None, Backward, Forward"):
        again.create_group("p", "Avro", "Full")
    with pytest.raises(ValueError, match="exists with format Json, not Avro"):
        again.create_group("events", "Avro")
    assert again.register("events", "e", "Json", '{ "type":"object" }')[2].id == version.id


@pytest.mark.parametrize(("args", "says"), [
    (["--registry-port", "0"], "--registry-port needs --tls-cert and --tls-key"),
    (["--schema-group", "orders:Protobuf"], "--schema-group 'orders:Protobuf': schema group format 'Protobuf' is not one of"),
])
def test_the_command_line_names_a_bad_registry_setting(tmp_path: Path, args: list[str], says: str) -> None:
    done = subprocess.run([sys.executable, "-m", "eventhubs_local", "--data-dir", str(tmp_path), "--port", "0",
                           "--admin-port", "0", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and says in done.stderr
