"""A typed event's record in the event trigger's payload, its filters and ``read_events``: the decoded value of every
Avro type in a JSON-safe form (decimals as text, instants ISO 8601 with their offset, dates ISO, UUIDs as text,
bytes as base64, a duration as its three counts), decoded by Microsoft's ``AvroEncoder`` over an in-process registry."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_eh.client.typed_events import AsyncTypedDecoder
from airflow_provider_eh.triggers.payload import batch_payload, decoded_record
from tests.support.typed_columns import EVERYTHING, AsyncRegistry, Endpoint, avro_row


@dataclass
class FakeEvent:
    """The fields of a received SDK ``EventData`` a record reads."""

    sequence_number: int
    body: bytes
    content_type: str
    offset: str = "0"
    properties: dict[Any, Any] = field(default_factory=dict)
    enqueued_time: Any = None


def b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def test_a_typed_events_record_holds_every_type_in_a_json_safe_form() -> None:
    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    registry = AsyncRegistry()
    message = AvroEncoder(client=registry, group_name="g", auto_register=True).encode(avro_row(2), schema=json.dumps(EVERYTHING))
    event = FakeEvent(7, message["content"], message["content_type"])

    async def record() -> dict[str, Any]:
        async def endpoint() -> Endpoint:
            return Endpoint(registry)

        decoder = AsyncTypedDecoder(endpoint)
        try:
            return await decoded_record(event, "1", decoder)
        finally:
            await decoder.close()

    found = asyncio.run(record())
    assert "decode_error" not in found and found["schema_id"] == message["content_type"].partition("+")[2]
    assert found["body"] == {
        "id": 2, "flag": True, "small": -2, "ratio": 3.0, "score": 2 / 3, "label": "ü-2",
        "raw": b64(bytes([2, 0, 255])), "code": b64(b"C002"), "color": "RED",
        "price": "2.02", "amount": "-2234.567", "ref": "12345678-1234-5678-1234-567812345602", "day": "2026-03-02",
        "clock_ms": "08:30:02.123000", "clock_us": "08:30:02.123456",
        "ts_ms": "2026-03-01T00:00:02.217000+00:00", "ts_us": "2026-03-01T00:00:02.217123+00:00",
        "local_ms": "2026-03-01T09:00:02.005000", "local_us": "2026-03-01T09:00:02.005123",
        "span": {"months": 2, "days": 2, "milliseconds": 3003},
        "note": "note 2", "either": "s2", "tags": ["a", "t2"], "counts": {"x": 2, "y": -1},
        "address": {"street": "Main 2", "since": "2020-01-02", "deposit": "99.50"},
        "lines": [{"sku": "k2", "qty": 2}, {"sku": "z", "qty": 0}],
    }
    payload = batch_payload([found], namespace="ns", eventhub="hub", consumer_group="$Default", include_bodies=True)
    assert json.loads(json.dumps(payload))["bodies"] == [
        {"partition": "1", "sequence_number": 7, "body": found["body"], "schema_id": found["schema_id"]}]
