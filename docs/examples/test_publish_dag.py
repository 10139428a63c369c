"""A test of your own DAG against the local Event Hubs endpoint and Azurite, with no Azure.

It runs ``example_publish_events`` twice for one day, as a retry or a backfill would, and reads the
hub back: each of the day's events is there once. Run it with pytest. ``dag.test()`` needs Airflow's
metadata database (run ``airflow db migrate`` once for the test environment's ``AIRFLOW_HOME``), and
``AzuriteProcess`` needs Azurite (``npm install azurite``: ``azurite-blob`` on ``PATH``, or
``AZURITE_BIN`` naming it).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub
from eventhubs_local import EmulatorProcess
from eventhubs_local.azurite import AzuriteProcess

DAGS = Path(__file__).parent  # the folder of the DAG under test


def test_a_rerun_of_a_day_publishes_each_event_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs of one day leave each of the day's events on the hub once."""
    monkeypatch.syspath_prepend(str(DAGS))
    from publish_events import example_publish_events

    with EmulatorProcess(tmp_path / "eh", hubs={"orders": 4}) as eh, AzuriteProcess(tmp_path / "azurite") as blob:
        monkeypatch.setenv("AIRFLOW_CONN_AZURE_EVENT_HUBS_DEFAULT", json.dumps(
            {"conn_type": "azure_event_hubs", "extra": {"connection_string": eh.connection_string()}}))
        monkeypatch.setenv("AIRFLOW_CONN_WASB_DEFAULT", json.dumps(
            {"conn_type": "wasb", "extra": {"connection_string": blob.connection_string}}))

        dag = example_publish_events()
        day = datetime(2026, 11, 2, tzinfo=UTC)
        for _ in range(2):  # the day's run, then a re-run of it
            assert dag.test(logical_date=day).state == "success"

        events = read_hub(EventHubsEndpoint.from_connection_string(eh.connection_string("orders"), "orders"))

    orders = Counter(json.loads(event.body)["order_id"] for event in events)
    assert len(orders) == 100, "the day has 100 orders"
    assert set(orders.values()) == {1}, "each order is in the hub once"
