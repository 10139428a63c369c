"""The await-event sensor in real Airflow runs (``dag.test()``) against the local endpoint and Azurite.

Deferrable: ``dag.test()`` runs the trigger in-line once the task deferred; a helper thread publishes
the matching event only after the deferral is in the DB, so the sensor provably waited. Poke mode
needs no triggerer. The timeout names the hub, the consumer group and how far each partition was read.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from types import ModuleType

import pytest

from airflow_provider_eh.testing.events import send_json

from airflow_provider_eh.testing.dag_test import deferred_to, returned, when

DAGS_FILE = Path(__file__).with_name("dags") / "await_event_dags.py"
TRIGGER = "airflow_provider_eh.triggers.event.EventHubAwaitEventTrigger"


@pytest.fixture
def await_dags(airflow_db: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    bundles = [
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}},
        {"name": "await-event-tests", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
         "kwargs": {"path": str(DAGS_FILE.parent)}},
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    spec = importlib.util.spec_from_file_location("await_event_dags", DAGS_FILE)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def order(order_id: str, event_type: str, amount: int = 100) -> dict:
    return {"order_id": order_id, "event_type": event_type, "amount_cents": amount}


def _checkpoint(azurite, container: str, hub: str, partition: str) -> dict:  # type: ignore[no-untyped-def]
    from azure.storage.blob import ContainerClient

    client = ContainerClient.from_connection_string(azurite.connection_string, container)
    blobs = [b for b in client.list_blobs(include=["metadata"]) if b.name.endswith(f"/{hub}/analytics/checkpoint/{partition}")]
    assert len(blobs) == 1, [b.name for b in client.list_blobs()]
    return dict(blobs[0].metadata)


def test_deferrable_sensor_returns_the_filters_result_and_checkpoints_the_event(
    await_dags: ModuleType, connections: dict[str, str], container: str, azurite  # type: ignore[no-untyped-def]
) -> None:
    send_json(connections["event_hubs"], "1", [order("o-1", "paid", 500)])  # before the sensor starts: latest skips it
    sent: list[bool] = []
    watcher = when(
        deferred_to("await_deferrable", TRIGGER),
        lambda: (send_json(connections["event_hubs"], "2", [order("o-2", "placed"), order("o-2", "paid", 250)]), sent.append(True)),
    )

    dr = await_dags.await_deferrable.test(run_conf={"hub": connections["hub"], "container": container})

    watcher.join(30)
    assert sent == [True], "the sensor never deferred to EventHubAwaitEventTrigger"
    (ti,) = dr.get_task_instances()
    assert ti.state == "success"
    assert returned(ti) == {"order_id": "o-2", "amount_cents": 250, "seq": 1}
    assert _checkpoint(azurite, container, connections["hub"], "2")["sequencenumber"] == "1"


def test_poke_mode_finds_the_event_without_a_triggerer(
    await_dags: ModuleType, connections: dict[str, str], container: str
) -> None:
    send_json(connections["event_hubs"], "0", [order("o-3", "placed")])
    threading.Timer(2.5, lambda: send_json(connections["event_hubs"], "3", [order("o-3", "paid", 70)])).start()

    dr = await_dags.await_poke.test(run_conf={"hub": connections["hub"], "container": container})

    (ti,) = dr.get_task_instances()
    assert ti.state == "success"
    assert returned(ti) == {"order_id": "o-3", "amount_cents": 70, "seq": 0}


def test_timeout_names_the_hub_the_group_and_how_far_it_read(
    await_dags: ModuleType, connections: dict[str, str], container: str, capfd  # type: ignore[no-untyped-def]
) -> None:
    send_json(connections["event_hubs"], "0", [order("o-4", "placed"), order("o-4", "shipped")])

    dr = await_dags.await_deferrable_timeout.test(run_conf={"hub": connections["hub"], "container": container})

    (ti,) = dr.get_task_instances()
    assert ti.state == "failed"
    out = capfd.readouterr().out
    (failure,) = [line for line in out.splitlines() if "AirflowSensorTimeout:" in line][-1:]
    assert f"no matching event in Event Hub {connections['hub']!r} (consumer group 'analytics')" in failure
    assert "partition 0: from seq -1 to 1" in failure and "partition 3: from seq -1 to -1" in failure
