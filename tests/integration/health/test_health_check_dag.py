"""The alert recipe through Airflow: the example DAG ``docs/examples/health_check.py`` run by ``dag.test()`` against
the local endpoint and Azurite, on ledgers a real publish wrote and checkpoints the SDK's ``BlobCheckpointStore``
wrote.

A healthy hub passes with a summary; a pending batch older than the bound (an intent written through the real
state store, with the start time of a publish two hours ago, on either backend) and a consumer group too far
behind fail the task naming the group, partition, batch id and age, and the group, partition and lag, and the
DAG's failure callback raises the alert. Nothing waits on the clock: the batch's age is in its record.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.publishing import IdempotentPublisher, StateKey
from airflow_provider_eh.publishing.records import PendingIntent

# dag.test() runs the tasks in this process, and the task runner leaves AIRFLOW_CTX_* in os.environ
pytestmark = pytest.mark.usefixtures("restored_environ")

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
GROUP = "orders.publish"
CONSUMER_GROUP = "analytics"  # created beside $Default by the `hub` fixture


@pytest.fixture
def example(airflow_db: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example DAG, with the examples' folder added as a DAG bundle (``dag.test()`` serialises DAGs from bundles)."""
    bundles = [
        {"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle", "kwargs": {}},
        {"name": "doc-examples", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
         "kwargs": {"path": str(EXAMPLES)}},
    ]
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps(bundles))
    spec = importlib.util.spec_from_file_location("health_check", EXAMPLES / "health_check.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture
def stack(event_hubs: Any, azurite: Any, connections: dict[str, str], container: str) -> dict[str, Any]:
    """The test's hub with a day published by a real publish on the blob backend (group ``orders.publish``, every
    partition), and the ``analytics`` group checkpointed at the end of every partition by the SDK's store."""
    from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore
    from azure.storage.blob import BlobServiceClient

    hub = connections["hub"]
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    blobs = BlobServiceClient.from_connection_string(azurite.connection_string)
    checkpoints = f"{container}-cp"
    blobs.create_container(checkpoints)
    from airflow_provider_eh.publishing import BlobProducerStateStore

    store = BlobProducerStateStore(blobs.get_container_client(container))
    results = IdempotentPublisher(endpoint, store, producer_group=GROUP).publish(
        [{"body": {"n": n}, "partition_id": str(n % 4)} for n in range(8)], batch_id="day-1")
    checkpoint_store = BlobCheckpointStore.from_connection_string(azurite.connection_string, checkpoints)

    def checkpoint(partition: str, sequence_number: int) -> None:
        checkpoint_store.update_checkpoint({
            "fully_qualified_namespace": endpoint.fully_qualified_namespace, "eventhub_name": hub,
            "consumer_group": CONSUMER_GROUP, "partition_id": partition, "sequence_number": sequence_number,
            "offset": "0"})

    for partition, result in results.items():
        checkpoint(partition, result.service_last_sequence_number)
    return {"hub": hub, "endpoint": endpoint, "store": store, "state": container, "checkpoints": checkpoints}


def conf(stack: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return {"hub": stack["hub"], "producer_groups": [GROUP], "state_backend": "blob", "state_container": stack["state"],
            "consumer_groups": [CONSUMER_GROUP], "checkpoint_container": stack["checkpoints"], "max_batch_age_minutes": 30,
            "max_lag": 3, **overrides}


def run(example: ModuleType, stack: dict[str, Any], run_conf: dict[str, Any]) -> Any:
    """One ``dag.test()`` of the example on the test's hub; the check's task instance."""
    (ti,) = example.example_health_check().test(run_conf=run_conf).get_task_instances()
    return ti


def write_pending(store: Any, key: StateKey, started: datetime) -> str:
    """Leave an intent in ``key``'s ledger as a publish that crashed mid-send at ``started`` would: through the
    real store, claimed and released."""
    claim = store.claim(key)
    try:
        state = claim.state
        state.pending = PendingIntent("f" * 64, state.last_published_seq + 1, None, 5, "fp", state.owner_level, -1, [],
                                      started_at=started.isoformat(),
                                      origin={"dag_id": "orders", "task_id": "publish", "run_id": "manual__crashed",
                                              "map_index": -1, "try_number": 1})
        store.write(claim, state)
    finally:
        store.release(claim)
    return "f" * 64


def test_a_healthy_hub_passes_with_a_summary_of_its_ledgers_and_lags(example: ModuleType, stack: dict[str, Any]) -> None:
    ti = run(example, stack, conf(stack))
    assert str(ti.state) == "success"
    summary = ti.xcom_pull(task_ids="check_orders")
    assert summary["healthy"] is True and summary["problems"] == []
    assert summary["producer_groups"] == {GROUP: {"ledgers": 4, "open_batches": []}}
    assert summary["consumer_groups"] == {CONSUMER_GROUP: {p: 0 for p in ("0", "1", "2", "3")}}
    assert (summary["max_batch_age_seconds"], summary["max_lag"]) == (1800.0, 3)


def test_an_old_pending_batch_and_a_lagging_group_fail_the_check_and_the_callback_alerts(
    example: ModuleType, stack: dict[str, Any], caplog: pytest.LogCaptureFixture,
) -> None:
    from azure.eventhub import EventData

    hub, endpoint = stack["hub"], stack["endpoint"]
    batch = write_pending(stack["store"], StateKey.of(endpoint, GROUP, "2"), datetime.now(UTC) - timedelta(hours=2))
    with endpoint.producer() as producer:  # 3 new events on partition 1 (at the bound), 4 on partition 3 (over it)
        for partition, count in (("1", 3), ("3", 4)):
            events = producer.create_batch(partition_id=partition)
            for n in range(count):
                events.add(EventData(json.dumps({"extra": n})))
            producer.send_batch(events)

    with caplog.at_level(logging.ERROR, logger="eh_example_alerts"):
        ti = run(example, stack, conf(stack))
    assert str(ti.state) == "failed"
    alerts = [r.getMessage() for r in caplog.records if r.name == "eh_example_alerts"]
    assert len(alerts) == 1, caplog.text[-3000:]
    (alert,) = alerts
    assert alert.startswith(f"ALERT example_health_check.check_orders ({ti.run_id}): Task 'check_orders': hub {hub!r}: "
                            "2 problem(s) found by the health check:")
    assert (f"producer group {GROUP!r} partition 2: batch {batch} (eh.batch {batch[:16]}) pending for 2 h 00 min "
            "(bound 30 min), 5 events; published by DAG 'orders' task 'publish' run 'manual__crashed' try 1.") in alert
    assert (f"consumer group {CONSUMER_GROUP!r} partition 3: 4 events behind (bound 3): checkpoint at sequence number 1, "
            "last enqueued 5; no consumer owns the partition.") in alert
    assert "partition 1:" not in alert

    # a bound above its age: the same open batch is reported, not failed (and the lag is under a looser bound)
    ti = run(example, stack, conf(stack, max_batch_age_minutes=180, max_lag=10))
    assert str(ti.state) == "success"
    (open_batch,) = ti.xcom_pull(task_ids="check_orders")["producer_groups"][GROUP]["open_batches"]
    assert (open_batch["partition"], open_batch["kind"], open_batch["batch_id"], open_batch["stale"]) == (
        "2", "pending", batch, False)


def test_the_variables_backend_ledgers_are_checked_too(
    example: ModuleType, stack: dict[str, Any], caplog: pytest.LogCaptureFixture,
) -> None:
    from airflow_provider_eh.hooks.producer_state import ProducerStateHook

    store = ProducerStateHook("variable").get_store()
    key = StateKey.of(stack["endpoint"], "orders.on-variables", "0")
    batch = write_pending(store, key, datetime.now(UTC) - timedelta(minutes=45))
    with caplog.at_level(logging.ERROR, logger="eh_example_alerts"):
        ti = run(example, stack, conf(stack, producer_groups=["orders.on-variables", "orders.typo"],
                                      state_backend="variable", consumer_groups=[]))
    assert str(ti.state) == "failed"
    (alert,) = [r.getMessage() for r in caplog.records if r.name == "eh_example_alerts"]
    assert f"producer group 'orders.on-variables' partition 0: batch {batch} " in alert and "pending for 45 min" in alert
    assert f"producer group 'orders.typo': no ledger on any partition of hub {stack['hub']!r} in Airflow Variables" in alert
    ti = run(example, stack, conf(stack, producer_groups=["orders.on-variables"], state_backend="variable",
                                  max_batch_age_minutes=60))
    assert str(ti.state) == "success"
    summary = ti.xcom_pull(task_ids="check_orders")
    assert summary["producer_groups"]["orders.on-variables"]["ledgers"] == 1
    assert [b["batch_id"] for b in summary["producer_groups"]["orders.on-variables"]["open_batches"]] == [batch]
