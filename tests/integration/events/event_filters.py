"""Filters the event tests name by dotted path (``tests.integration.events.event_filters.<name>``)."""

from __future__ import annotations

import json
from typing import Any


def paid_order(record: dict[str, Any]) -> dict[str, Any] | None:
    """The order id and amount of a ``paid`` event; ``None`` (no match) for the others."""
    body = json.loads(record["body"])
    if body.get("event_type") != "paid":
        return None
    return {"order_id": body["order_id"], "amount_cents": body["amount_cents"], "seq": record["sequence_number"]}


def paid_order_at(record: dict[str, Any]) -> dict[str, Any] | None:
    """As :func:`paid_order`, with the event's enqueued time."""
    found = paid_order(record)
    return None if found is None else {**found, "enqueued_time": record["enqueued_time"]}


def big_typed_order(record: dict[str, Any]) -> dict[str, Any] | None:
    """A typed order (decoded: ``body`` is a dict) of at least 100; its id, amount, schema id and sequence number."""
    body = record["body"]
    if "schema_id" not in record or not isinstance(body, dict) or body.get("amount", 0) < 100:
        return None
    return {"order_id": body["order_id"], "amount": body["amount"], "schema_id": record["schema_id"],
            "seq": record["sequence_number"]}


def undecodable_event(record: dict[str, Any]) -> str | None:
    """Why a typed event could not be decoded (``decode_error``), for the first that could not."""
    return record.get("decode_error")
