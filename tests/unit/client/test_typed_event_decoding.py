"""Decoding typed events: content types, the schema cache, and which failures are the event's.

Microsoft's real ``AvroEncoder`` encodes and decodes; the registry is a small stand-in that counts what it is
asked (the integration tests use the local endpoint's registry).
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import json
from typing import Any

import pytest
from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError, ServiceRequestError

from airflow_provider_eh.client.typed_events import (
    AsyncTypedDecoder,
    TypedContent,
    TypedDecoder,
    UndecodableEventError,
    json_safe,
    typed_content,
)
from airflow_provider_eh.errors import ConnectionUnreachableError, CredentialRefusedError

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "t",
                    "fields": [{"name": "order_id", "type": "long"}, {"name": "amount", "type": "int"}]})


class Schema:
    def __init__(self, definition: str):
        self.definition = definition


class Registry:
    """Schemas by id; ``asked`` counts the ``get_schema`` calls per id; ``fail`` makes every call raise it."""

    def __init__(self, schemas: dict[str, str], fail: Exception | None = None):
        self.schemas = schemas
        self.asked: dict[str, int] = {}
        self.fail = fail

    def get_schema(self, schema_id: str, **kwargs: Any) -> Schema:
        self.asked[schema_id] = self.asked.get(schema_id, 0) + 1
        if self.fail is not None:
            raise self.fail
        if schema_id not in self.schemas:
            raise ResourceNotFoundError(f"Schema id '{schema_id}' does not exist.")
        return Schema(self.schemas[schema_id])

    def get_schema_properties(self, group: str, name: str, definition: str, fmt: str, **kwargs: Any) -> Any:
        return type("Props", (), {"id": next(k for k, v in self.schemas.items() if v == definition)})()

    def close(self) -> None:
        pass


class AsyncRegistry(Registry):
    async def get_schema(self, schema_id: str, **kwargs: Any) -> Schema:  # type: ignore[override]
        return Registry.get_schema(self, schema_id, **kwargs)

    async def close(self) -> None:  # type: ignore[override]
        pass


class Endpoint:
    fully_qualified_namespace = "ns.example"

    def __init__(self, registry: Registry):
        self.registry = registry

    def client(self) -> Registry:
        return self.registry

    def async_client(self) -> Registry:
        return self.registry


def encoded(registry: Registry, row: dict[str, Any]) -> dict[str, Any]:
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    return dict(AvroEncoder(client=registry, group_name="g").encode(row, schema=ORDER))


@pytest.mark.parametrize(("content_type", "expected"), [
    ("avro/binary+abc123", TypedContent("Avro", "abc123")),
    ("application/json;serialization=Json+f00", TypedContent("Json", "f00")),
    ("application/json; serialization=Json+f00", TypedContent("Json", "f00")),
    ("application/json", None), ("application/vnd.api+json", None), ("avro/binary+", None), (None, None), ("", None),
])
def test_only_the_content_types_of_microsofts_encoders_name_a_schema_id(content_type, expected) -> None:
    assert typed_content(content_type) == expected


def test_each_schema_is_fetched_once_an_unknown_id_once_too_and_the_cache_is_bounded() -> None:
    registry = Registry({"a" * 32: ORDER})
    message = encoded(registry, {"order_id": 1, "amount": 2})
    registry.asked.clear()
    decoder = TypedDecoder(lambda: Endpoint(registry), cache_size=2)
    for _ in range(5):
        assert decoder.decode(message["content"], message["content_type"]) == {"order_id": 1, "amount": 2}
    for _ in range(3):
        with pytest.raises(UndecodableEventError, match=r"^schema id 0+ \(Avro\) is not in the Schema Registry"):
            decoder.decode(b"\x02", "avro/binary+" + "0" * 32)
    assert registry.asked == {"a" * 32: 1, "0" * 32: 1} and decoder.cache.fetched == 2
    with pytest.raises(UndecodableEventError):
        decoder.decode(b"\x02", "avro/binary+" + "1" * 32)
    assert decoder.cache.get("a" * 32) is None and decoder.cache.get("1" * 32) is not None  # the oldest id dropped


def test_corrupt_content_is_the_events_failure_an_unreachable_or_refusing_registry_the_runs() -> None:
    registry = Registry({"a" * 32: ORDER})
    message = encoded(registry, {"order_id": 1, "amount": 2})
    with pytest.raises(UndecodableEventError, match=r"^schema id a+ \(Avro\): the content does not decode as Avro"):
        TypedDecoder(Endpoint(registry)).decode(message["content"][:1], message["content_type"])
    down = Registry({}, fail=ServiceRequestError("connection refused"))
    with pytest.raises(ConnectionUnreachableError, match=r"^Connection 'reg': the Schema Registry at ns\.example "
                                                         r"did not answer \(ServiceRequestError: connection refused\)"):
        TypedDecoder(Endpoint(down), conn_id="reg").decode(message["content"], message["content_type"])
    refused = Registry({}, fail=ClientAuthenticationError("401 Unauthorized"))
    with pytest.raises(CredentialRefusedError, match="refused the credential") as caught:
        TypedDecoder(Endpoint(refused), conn_id="reg").decode(message["content"], message["content_type"])
    assert not caught.value.retryable


def test_without_a_registry_a_typed_event_says_to_set_one() -> None:
    for decoder in (TypedDecoder(None), TypedDecoder(lambda: (_ for _ in ()).throw(ValueError("field 'x' is empty")))):
        with pytest.raises(UndecodableEventError, match="set schema_registry_conn_id") as caught:
            decoder.decode(b"\x02", "avro/binary+abc")
        assert str(caught.value).startswith("schema id abc (Avro): the event is typed but")


def test_the_async_decoder_decodes_and_caches_as_the_sync_one() -> None:
    registry = AsyncRegistry({"a" * 32: ORDER})
    message = encoded(Registry({"a" * 32: ORDER}), {"order_id": 7, "amount": 8})

    async def run() -> list[Any]:
        async def endpoint() -> Endpoint:
            return Endpoint(registry)

        decoder = AsyncTypedDecoder(endpoint)
        try:
            return [await decoder.decode(message["content"], message["content_type"]) for _ in range(3)]
        finally:
            await decoder.close()

    assert asyncio.run(run()) == [{"order_id": 7, "amount": 8}] * 3 and registry.asked == {"a" * 32: 1}


def test_decoded_values_become_json() -> None:
    value = {"b": b"\x00\xff", "t": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), "d": decimal.Decimal("1.50"),
             "n": [datetime.date(2026, 1, 2)], "x": None}
    assert json_safe(value) == {"b": "AP8=", "t": "2026-01-01T00:00:00+00:00", "d": "1.50", "n": ["2026-01-02"], "x": None}
