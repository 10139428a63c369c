"""The sensor in a real Airflow run (``dag.test()``): reschedule mode, and deferrable mode with the trigger run for real.

``dag.test()`` runs the task through the Task SDK's supervisor against the metadata DB and, when
the task defers, runs the trigger's ``run()`` in-line. A helper thread watches the DB for the
deferral (or the reschedule) and only then lets the SDK consumer catch up, so each test proves the
sensor waited and then saw the checkpoint reach its target.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from airflow_provider_eh.testing.dag_test import deferred_to, returned, when

# dag.test() runs the tasks in this process, and the task runner leaves AIRFLOW_CTX_* in os.environ
pytestmark = pytest.mark.usefixtures("restored_environ")

CONSUMER_GROUP = "analytics"  # created beside $Default by the `hub` fixture
TRIGGER = "airflow_provider_eh.triggers.checkpoint.EventHubCheckpointTrigger"


DAGS_FILE = Path(__file__).with_name("dags") / "checkpoint_sensor_dags.py"


@pytest.fixture
def checkpoint_dags(airflow_db: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The test DAGs, with their folder added as a DAG bundle (``dag.test()`` serialises DAGs from bundles)."""
    bundles = [
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}},
        {
            "name": "checkpoint-sensor-tests",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(DAGS_FILE.parent)},
        },
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    spec = importlib.util.spec_from_file_location("checkpoint_sensor_dags", DAGS_FILE)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _run(dag, container: str, targets: object):  # type: ignore[no-untyped-def]
    """``dag.test()`` with the run's conf; returns the sensor's task instance."""
    dr = dag.test(run_conf={"container": container, "targets": targets})
    (ti,) = dr.get_task_instances()
    return ti


def _rescheduled(dag_id: str) -> Callable[[], bool]:
    def check() -> bool:
        from sqlalchemy import func, select

        from airflow.models.taskinstance import TaskInstance
        from airflow.models.taskreschedule import TaskReschedule
        from airflow.utils.session import create_session

        with create_session() as session:
            return bool(
                session.scalar(
                    select(func.count(TaskReschedule.id))
                    .join(TaskInstance, TaskInstance.id == TaskReschedule.ti_id)
                    .where(TaskInstance.dag_id == dag_id)
                )
            )

    return check


def test_deferrable_sensor_defers_and_its_trigger_succeeds_once_the_consumer_catches_up(
    checkpoint_dags: ModuleType, connections: dict[str, str], container: str, publish, consumers  # type: ignore[no-untyped-def]
) -> None:
    published = publish({"0": 3, "1": 2, "2": 0, "3": 1})
    consumers.run({"0": 2, "1": 0, "3": 0})  # partition 1 is one event short of its target 1
    caught_up: list[bool] = []
    watcher = when(
        deferred_to("checkpoint_deferrable", TRIGGER),
        lambda: (consumers.run({"1": 1}), caught_up.append(True)),
    )

    ti = _run(checkpoint_dags.checkpoint_deferrable, container, published)

    watcher.join(30)
    assert caught_up == [True], "the sensor never deferred to EventHubCheckpointTrigger"
    assert ti.state == "success"
    assert returned(ti) == {CONSUMER_GROUP: {"0": 2, "1": 1, "3": 0}}


def test_deferrable_sensor_times_out_with_the_lag_of_each_partition(
    checkpoint_dags: ModuleType, connections: dict[str, str], container: str, publish, consumers, capfd  # type: ignore[no-untyped-def]
) -> None:
    published = publish({"0": 4, "1": 2})
    consumers.run({"0": 1, "1": 1})  # the consumer stops two events short on partition 0

    ti = _run(checkpoint_dags.checkpoint_deferrable_timeout, container, published)

    assert ti.state == "failed"
    (failure,) = [line for line in capfd.readouterr().out.splitlines() if "AirflowSensorTimeout:" in line][-1:]
    assert "Sensor has timed out after 4.0 seconds" in failure
    assert "partition 0: checkpoint 1, target 3 (2 to go), last enqueued 3, lag 2" in failure
    assert "partition 1: checkpoint 1, target 1 (reached)" in failure


def test_reschedule_mode_gives_back_the_slot_and_succeeds_once_the_consumer_catches_up(
    checkpoint_dags: ModuleType, connections: dict[str, str], container: str, publish, consumers  # type: ignore[no-untyped-def]
) -> None:
    published = publish({"0": 2, "1": 2, "2": 2, "3": 2})
    consumers.run({"0": 1, "1": 1, "2": 0, "3": 1})  # partition 2 one event short
    caught_up: list[bool] = []
    watcher = when(
        _rescheduled("checkpoint_reschedule"), lambda: (consumers.run({"2": 1}), caught_up.append(True))
    )

    ti = _run(checkpoint_dags.checkpoint_reschedule, container, published)

    watcher.join(30)
    assert caught_up == [True], "the sensor was never rescheduled"
    assert ti.state == "success"
    assert returned(ti) == {CONSUMER_GROUP: {"0": 1, "1": 1, "2": 1, "3": 1}}
