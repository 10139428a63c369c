"""The event-bounded ingest operator takes its bound only from asset events of its own namespace and hub."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_eh.operators.ingest_events import EventHubIngestEventsOperator, triggering_payloads

NAMESPACE = "ns-a.servicebus.windows.net"


def asset_event(namespace: str, hub: str, partitions: dict[str, tuple[int, int]]) -> SimpleNamespace:
    """An asset event as the run's context holds it, with the event trigger's payload in ``extra``."""
    payload = {
        "namespace": namespace, "eventhub": hub, "consumer_group": "airflow-watcher",
        "events": sum(last - first + 1 for first, last in partitions.values()),
        "partitions": {p: {"first": first, "last": last, "count": last - first + 1} for p, (first, last) in partitions.items()},
    }
    return SimpleNamespace(extra={"payload": payload})


@pytest.fixture
def context() -> dict[str, Any]:
    """A run scheduled on three hubs' assets: orders (ns-a), payments (ns-a) and orders in another namespace."""
    return {"triggering_asset_events": {
        "orders": [asset_event(NAMESPACE, "orders", {"0": (10, 14)}), asset_event(NAMESPACE, "Orders", {"1": (3, 3)})],
        "payments": [asset_event(NAMESPACE, "payments", {"0": (900, 950), "1": (700, 720)})],
        "orders-b": [asset_event("ns-b.servicebus.windows.net", "orders", {"0": (500, 600)})],
        "not-ours": [SimpleNamespace(extra={"something": "else"})],
    }}


def test_the_bound_comes_from_the_operators_own_hub_only(context: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_EH_ORDERS", json.dumps({
        "conn_type": "azure_event_hubs",
        "extra": {"connection_string": f"Endpoint=sb://{NAMESPACE}/;SharedAccessKeyName=k;SharedAccessKey=s;EntityPath=orders"},
    }))
    operator = EventHubIngestEventsOperator(
        task_id="load", table="t", sql_conn_id="db", event_hubs_conn_id="eh_orders", eventhub_name="orders",
    )

    assert operator._upto(context) == {"0": 14, "1": 3}  # not 950/720 (payments) nor 600 (the other namespace)


def test_triggering_payloads_filter_by_hub_and_namespace(context: dict[str, Any]) -> None:
    assert len(triggering_payloads(context)) == 4  # every payload without a hub given
    assert [p["eventhub"] for p in triggering_payloads(context, "payments")] == ["payments"]
    assert len(triggering_payloads(context, "ORDERS", NAMESPACE.upper())) == 2
    assert [p["namespace"] for p in triggering_payloads(context, "orders", "ns-b.servicebus.windows.net")] == [
        "ns-b.servicebus.windows.net"
    ]
