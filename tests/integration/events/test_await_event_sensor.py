"""The await-event sensor in real Airflow runs (``dag.test()``) against the local endpoint and Azurite.

Deferrable: ``dag.test()`` runs the trigger in-line once the task deferred; a helper thread publishes
the matching event only after the deferral is in the DB, so the sensor provably waited. Poke mode
needs no triggerer and never defers; its matching event is published once the sensor's receivers are
open on every partition (the local endpoint lists them), after an earlier match that ``latest`` skips.
Reschedule mode finds an event enqueued between two pokes. A timeout names the hub, the consumer group
and how far each partition was read; a consumer group the hub does not have fails without retries.
"""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.events import send_json

from airflow_provider_eh.testing.dag_test import deferred_to, returned, when

# dag.test() runs the tasks in this process, and the task runner leaves AIRFLOW_CTX_* in os.environ
pytestmark = pytest.mark.usefixtures("restored_environ")

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


def _last_failure(capfd: Any, exception: str) -> str:
    """The last line of the task's output that reports ``exception`` (the task's log goes to stdout)."""
    out = capfd.readouterr().out
    lines = [line for line in out.splitlines() if f"{exception}:" in line]
    assert lines, f"no {exception} in the output:\n{out[-3000:]}"
    return lines[-1]


def _await_triggers() -> int:
    """How many await-event triggers the metadata DB holds (a deferral adds one)."""
    from sqlalchemy import func, select

    from airflow.models.trigger import Trigger
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.scalar(select(func.count()).select_from(Trigger).where(Trigger.classpath == TRIGGER))


def _reading_every_partition(event_hubs: Any, hub: str) -> bool:
    """The sensor's receivers are open, their start positions fixed, on all four partitions of ``hub``."""
    receivers = event_hubs.admin.receivers(hub)
    return {r["partition"] for r in receivers if r["consumer_group"].lower() == "analytics"} == {"0", "1", "2", "3"}


def test_poke_mode_finds_an_event_enqueued_after_it_started_reading_and_never_defers(
    await_dags: ModuleType, connections: dict[str, str], container: str, event_hubs: Any
) -> None:
    send_json(connections["event_hubs"], "0", [order("o-3", "paid", 71)])  # before the sensor starts: latest skips it
    sent: list[bool] = []
    watcher = when(
        lambda: _reading_every_partition(event_hubs, connections["hub"]),
        lambda: (send_json(connections["event_hubs"], "3", [order("o-3", "placed"), order("o-3", "paid", 70)]), sent.append(True)),
    )
    triggers_before = _await_triggers()

    dr = await_dags.await_poke.test(run_conf={"hub": connections["hub"], "container": container})

    watcher.join(30)
    assert sent == [True], "the poking sensor never had receivers open on every partition"
    (ti,) = dr.get_task_instances()
    assert ti.state == "success"
    assert returned(ti) == {"order_id": "o-3", "amount_cents": 70, "seq": 1}
    assert ti.next_method is None and _await_triggers() == triggers_before, "the poking sensor deferred"


def _reschedules(ti: Any) -> list[Any]:
    from sqlalchemy import select

    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session

    with create_session() as session:
        return list(session.scalars(select(TaskReschedule).where(TaskReschedule.ti_id == ti.id).order_by(TaskReschedule.id)))


def _between_reading_pokes(dag_id: str) -> bool:
    """The sensor of ``dag_id`` is waiting for its next poke after at least one poke that read (the second)."""
    from sqlalchemy import select

    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id)).first()
        return ti is not None and ti.state == "up_for_reschedule" and len(_reschedules(ti)) >= 2


def test_reschedule_mode_finds_an_event_enqueued_between_two_pokes(
    await_dags: ModuleType, connections: dict[str, str], container: str
) -> None:
    """Each poke is a new operator: ``latest`` must not be "the end of the hub when this poke started"."""
    send_json(connections["event_hubs"], "1", [order("o-5", "paid", 80)])  # before the task starts: latest skips it
    sent: list[bool] = []
    watcher = when(
        lambda: _between_reading_pokes("await_reschedule"),
        lambda: (send_json(connections["event_hubs"], "2", [order("o-5", "paid", 90)]), sent.append(True)),
        timeout=90,
    )

    dr = await_dags.await_reschedule.test(run_conf={"hub": connections["hub"], "container": container})

    watcher.join(30)
    assert sent == [True], "the sensor was never between two pokes"
    (ti,) = dr.get_task_instances()
    assert ti.state == "success"
    found = returned(ti)
    assert {k: found[k] for k in ("order_id", "amount_cents", "seq")} == {"order_id": "o-5", "amount_cents": 90, "seq": 0}
    enqueued = datetime.fromisoformat(found["enqueued_time"])
    pauses = [(r.end_date, r.reschedule_date) for r in _reschedules(ti)[1:]]
    assert any(end <= enqueued <= next_poke for end, next_poke in pauses), (
        f"the event (enqueued {enqueued}) did not arrive between a reading poke's end and the next poke: {pauses}"
    )


@pytest.mark.parametrize("dag_id", ["await_unknown_group_poke", "await_unknown_group_deferrable"])
def test_a_consumer_group_the_hub_does_not_have_fails_without_retries(
    await_dags: ModuleType, connections: dict[str, str], container: str, capfd, dag_id: str  # type: ignore[no-untyped-def]
) -> None:
    dr = getattr(await_dags, dag_id).test(run_conf={"hub": connections["hub"], "container": container})

    (ti,) = dr.get_task_instances()
    assert ti.state == "failed" and ti.try_number == 1, "a retry cannot create the consumer group"
    failure = _last_failure(capfd, "AirflowFailException")
    assert f"Event Hub {connections['hub']!r} (consumer group 'no-such-group')" in failure
    assert "consumer group 'no-such-group' does not exist on the hub" in failure
    assert "Connection 'azure_event_hubs_default'" in failure and "Check the consumer_group argument" in failure


@pytest.mark.parametrize(
    "dag_id",
    [
        "await_deferrable_timeout",
        "await_poke_timeout",  # two pokes read (10 s, then up to the deadline): the message spans both
    ],
)
def test_timeout_names_the_hub_the_group_and_how_far_it_read(
    await_dags: ModuleType, connections: dict[str, str], container: str, capfd, dag_id: str  # type: ignore[no-untyped-def]
) -> None:
    send_json(connections["event_hubs"], "0", [order("o-4", "placed"), order("o-4", "shipped")])

    dr = getattr(await_dags, dag_id).test(run_conf={"hub": connections["hub"], "container": container})

    (ti,) = dr.get_task_instances()
    assert ti.state == "failed"
    failure = _last_failure(capfd, "AirflowSensorTimeout")
    assert f"no matching event in Event Hub {connections['hub']!r} (consumer group 'analytics')" in failure
    assert "partition 0: from seq -1 to 1" in failure and "partition 3: from seq -1 to -1" in failure
