"""A test of your own DAG against the local Event Hubs endpoint and Azurite, with no Azure.

It runs ``example_publish_events`` twice for one day, as a retry or a backfill would, and reads the
hub back: each of the day's events is there once. Run it with pytest, with
``airflow-provider-eh[testing]`` installed (its pytest fixtures ``eventhubs_endpoint`` and
``azurite_blob``), Azurite from npm (``npm install azurite``) and Airflow's metadata database
migrated once (``airflow db migrate``) for the test environment's ``AIRFLOW_HOME``.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.testing import read_hub, run_dag

DAGS = Path(__file__).parent  # the folder of the DAG under test


def test_a_rerun_of_a_day_publishes_each_event_once(
        eventhubs_endpoint: Any, azurite_blob: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs of one day leave each of the day's events on the hub once."""
    eventhubs_endpoint.admin.create_hub("orders", partitions=4)
    monkeypatch.setenv("AIRFLOW_CONN_AZURE_EVENT_HUBS_DEFAULT", json.dumps(
        {"conn_type": "azure_event_hubs", "extra": {"connection_string": eventhubs_endpoint.connection_string()}}))
    monkeypatch.setenv("AIRFLOW_CONN_WASB_DEFAULT", json.dumps(
        {"conn_type": "wasb", "extra": {"connection_string": azurite_blob.connection_string}}))
    monkeypatch.syspath_prepend(str(DAGS))
    from publish_events import example_publish_events

    dag = example_publish_events()
    day = datetime(2026, 11, 2, tzinfo=UTC)
    for _ in range(2):  # the day's run, then a re-run of it
        assert run_dag(dag, logical_date=day).state == "success"

    hub = EventHubsEndpoint.from_connection_string(eventhubs_endpoint.connection_string("orders"), "orders")
    orders = Counter(json.loads(event.body)["order_id"] for event in read_hub(hub))
    assert len(orders) == 100, "the day has 100 orders"
    assert set(orders.values()) == {1}, "each order is in the hub once"
