"""The checkpoint sensor against the SDK's own consumer (EventHubConsumerClient + BlobCheckpointStore) in a child process.

Events go to the local Event Hubs endpoint with the SDK producer, checkpoints to Azurite. The
consumer process checkpoints up to per-partition limits, so a test decides exactly where each
partition's checkpoint stands.
"""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException, AirflowSensorTimeout
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore

from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor

CONSUMER_GROUP = "analytics"  # created beside $Default by the `hub` fixture


def _sensor(connections: dict[str, str], container: str, **kwargs: object) -> EventHubCheckpointSensor:
    kwargs.setdefault("consumer_groups", CONSUMER_GROUP)
    kwargs.setdefault("poke_interval", 0.5)
    kwargs.setdefault("timeout", 60)
    return EventHubCheckpointSensor(
        task_id="wait_for_checkpoints",
        checkpoint_container=container,
        event_hubs_conn_id=connections["event_hubs"],
        wasb_conn_id=connections["wasb"],
        deferrable=False,
        **kwargs,  # type: ignore[arg-type]
    )


def _sdk_checkpoints(azurite: object, container: str, event_hubs: object, hub: str) -> dict[str, int]:
    """The checkpoints as the SDK itself lists them."""
    store = BlobCheckpointStore.from_connection_string(azurite.connection_string, container)  # type: ignore[attr-defined]
    namespace = f"{event_hubs.host}:{event_hubs.port}"  # type: ignore[attr-defined]
    return {c["partition_id"]: c["sequence_number"] for c in store.list_checkpoints(namespace, hub, CONSUMER_GROUP)}


def test_poke_mode_times_out_with_per_partition_lag_when_the_consumer_stops_short_then_succeeds_when_it_catches_up(
    connections: dict[str, str], container: str, publish, consumers, azurite: object, event_hubs: object  # type: ignore[no-untyped-def]
) -> None:
    published = publish({"0": 4, "1": 4, "2": 0, "3": 3})  # partition 2: nothing published, nothing to wait for
    sensor = _sensor(connections, container, targets=published, timeout=3)

    first = sensor.poke({})  # type: ignore[arg-type]
    assert not first.is_done
    assert "Consumer group 'analytics' has no checkpoints yet" in sensor._last_progress.summary()  # type: ignore[union-attr]

    consumers.run({"0": 3, "1": 1, "3": 2})  # partition 1 stops two events short of its target 3
    with pytest.raises(AirflowSensorTimeout) as timed_out:
        sensor.execute({})  # type: ignore[arg-type]
    message = str(timed_out.value)
    assert "Sensor has timed out" in message
    assert "partition 1: checkpoint 1, target 3 (2 to go), last enqueued 3, lag 2" in message
    assert "partition 0: checkpoint 3, target 3 (reached)" in message
    assert "partition 3: checkpoint 2, target 2 (reached)" in message
    assert "partition 2" not in message

    consumers.run({"1": 3})
    result = _sensor(connections, container, targets=published).execute({})  # type: ignore[arg-type]
    assert result == {CONSUMER_GROUP: {"0": 3, "1": 3, "3": 2}}
    assert _sdk_checkpoints(azurite, container, event_hubs, connections["hub"]) == {"0": 3, "1": 3, "3": 2}


def test_poke_mode_waits_while_consumers_run_and_returns_when_every_consumer_group_has_checkpointed_everything(
    connections: dict[str, str], container: str, publish, consumers  # type: ignore[no-untyped-def]
) -> None:
    published = publish({"0": 5, "1": 2, "2": 7, "3": 1})
    targets = {p: v["service_last_sequence_number"] for p, v in published.items()}
    groups = ["$Default", CONSUMER_GROUP]
    sensor = _sensor(connections, container, targets=published, consumer_groups=groups)
    assert not sensor.poke({}).is_done  # type: ignore[arg-type]

    procs = [consumers.start(targets, group=group) for group in groups]  # type: ignore[arg-type]
    result = sensor.execute({})  # type: ignore[arg-type]

    assert result == {"$Default": targets, CONSUMER_GROUP: targets}
    assert [proc.wait(30) for proc in procs] == [0, 0]


def test_without_targets_the_sensor_waits_for_everything_enqueued_when_it_started(
    connections: dict[str, str], container: str, publish, consumers  # type: ignore[no-untyped-def]
) -> None:
    publish({"0": 2, "1": 2, "2": 2, "3": 2})
    sensor = _sensor(connections, container, targets=None, timeout=2)
    with pytest.raises(AirflowSensorTimeout, match="partition 0: checkpoint none, target 1"):
        sensor.execute({})  # type: ignore[arg-type]

    publish({"0": 3})  # enqueued after the sensor started: not waited for
    consumers.run({"0": 1, "1": 1, "2": 1, "3": 1})
    assert sensor.execute({}) == {CONSUMER_GROUP: {"0": 1, "1": 1, "2": 1, "3": 1}}  # type: ignore[arg-type]


def test_a_target_partition_the_hub_does_not_have_fails_naming_it(
    connections: dict[str, str], container: str
) -> None:
    sensor = _sensor(connections, container, targets={"0": 1, "7": 3})
    with pytest.raises(AirflowFailException, match=r"has no partition 7 \(it has 0, 1, 2, 3\); fix the sensor's targets"):
        sensor.execute({})  # type: ignore[arg-type]


def test_a_missing_checkpoint_container_fails_naming_it(connections: dict[str, str]) -> None:
    sensor = _sensor(connections, "no-such-checkpoints", targets={"0": 1})
    with pytest.raises(AirflowFailException, match="container 'no-such-checkpoints' does not exist"):
        sensor.execute({})  # type: ignore[arg-type]


def test_one_poke_lists_blobs_once_per_consumer_group(
    connections: dict[str, str], container: str, publish, azurite: object, event_hubs: object  # type: ignore[no-untyped-def]
) -> None:
    from azure.storage.blob import BlobServiceClient

    published = publish({"0": 1, "1": 1})
    store = BlobCheckpointStore.from_connection_string(azurite.connection_string, container)  # type: ignore[attr-defined]
    namespace = f"{event_hubs.host}:{event_hubs.port}"  # type: ignore[attr-defined]
    for group in (CONSUMER_GROUP, "$Default"):
        for partition in "0123":
            where = {"fully_qualified_namespace": namespace, "eventhub_name": connections["hub"], "consumer_group": group, "partition_id": partition}
            store.update_checkpoint({**where, "sequence_number": 0, "offset": "0"})
            store.claim_ownership([{**where, "owner_id": "owner"}])
    requests: list[tuple[str, str]] = []
    sensor = _sensor(connections, container, targets=published, consumer_groups=[CONSUMER_GROUP, "$Default"])
    # The hook's own client kind, for the same account, with a storage request hook that counts.
    sensor.hook.blob_hook.service_client = BlobServiceClient.from_connection_string(  # type: ignore[misc]
        azurite.connection_string,  # type: ignore[attr-defined]
        raw_request_hook=lambda r: requests.append((r.http_request.method, r.http_request.url)),
    )

    assert sensor.poke({}).is_done and sensor.poke({}).is_done  # type: ignore[arg-type]

    # two pokes x two consumer groups x two spellings of the local namespace (with and without its port);
    # a namespace without a port (every real one) is one list per consumer group
    assert len(requests) == 2 * 2 * 2
    assert all(method == "GET" and "comp=list" in url for method, url in requests)


def test_sensor_waits_for_a_js_processor_and_a_python_processor_each_checkpointing_under_its_own_spelling(
    connections: dict[str, str], container: str, publish, consumers, js, azurite: object, event_hubs: object  # type: ignore[no-untyped-def]
) -> None:
    # Python's BlobCheckpointStore writes under 127.0.0.1:<port>/..., the JS one under 127.0.0.1/...
    published = publish({"0": 3, "1": 2, "2": 0, "3": 2})
    targets = {p: v["service_last_sequence_number"] for p, v in published.items() if v["events"]}
    groups = ["$Default", CONSUMER_GROUP]

    def js_processor(limits: dict[str, int]) -> dict[str, object]:
        (result,) = js(event_hubs, connections["hub"], [{
            "op": "processWithCheckpoints", "consumerGroup": CONSUMER_GROUP, "targets": limits,
            "storageConnectionString": azurite.connection_string, "container": container,  # type: ignore[attr-defined]
        }], timeout=45)
        return result

    consumers.run(targets, group="$Default")  # the Python processor reaches every target
    short = js_processor({"0": 2, "1": 0, "3": 1})  # the JS processor stops short on every partition
    assert short["checkpointed"] == {"0": 2, "1": 0, "3": 1}
    assert sorted((c["partitionId"], c["sequenceNumber"]) for c in short["listed"]) == [("0", 2), ("1", 0), ("3", 1)]

    early = _sensor(connections, container, targets=published, consumer_groups=groups)
    assert not early.poke({}).is_done  # type: ignore[arg-type]
    summary = early._last_progress.summary()  # type: ignore[union-attr]
    assert "has no checkpoints yet" not in summary  # the JS processor's checkpoints are seen ...
    assert "consumer group 'analytics': partition 0: checkpoint 2, target 2 (reached)" in summary
    assert "partition 1: checkpoint 0, target 1 (1 to go)" in summary  # ... and are short of the targets

    js_processor(targets)
    result = _sensor(connections, container, targets=published, consumer_groups=groups).execute({})  # type: ignore[arg-type]
    assert result == {"$Default": targets, CONSUMER_GROUP: targets}
