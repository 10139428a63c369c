"""The event trigger against the local endpoint and Azurite: checkpoints in the SDK's layout, read-back, bad hubs and groups."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.events import fire_trigger, send_json
from airflow_provider_eh.errors import EventTriggerConfigError, UnknownConsumerGroupError, UnknownEventHubError
from airflow_provider_eh.triggers.event import EventHubEventTrigger
from airflow_provider_eh.triggers.payload import read_events


def test_fires_per_batch_checkpoints_in_the_sdk_layout_and_reads_the_events_back(
    connections: dict[str, str], container: str, azurite: Any
) -> None:
    from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore

    send_json(connections["event_hubs"], "0", [{"n": i} for i in range(3)])
    send_json(connections["event_hubs"], "2", [{"n": 10}])
    trigger = EventHubEventTrigger(
        eventhub_name=connections["hub"], consumer_group="analytics", checkpoint_container=container,
        batch_size=100, batch_window=1.0, include_bodies=True,
    )
    (payload,) = fire_trigger(trigger, 1)
    assert payload["partitions"] == {"0": {"first": 0, "last": 2, "count": 3}, "2": {"first": 0, "last": 0, "count": 1}}
    assert payload["eventhub"] == connections["hub"] and payload["consumer_group"] == "analytics"
    # the lag from the stream (the receiver runtime metric): each partition read to its end
    assert payload["lag"] == {"0": {"last_enqueued": 2, "behind": 0}, "2": {"last_enqueued": 0, "behind": 0}}
    assert sorted(json.loads(b["body"])["n"] for b in payload["bodies"]) == [0, 1, 2, 10]

    store = BlobCheckpointStore.from_connection_string(azurite.connection_string, container)
    namespace = payload["namespace"]
    checkpoints = {c["partition_id"]: c["sequence_number"] for c in
                   store.list_checkpoints(namespace, connections["hub"], "analytics")}
    assert checkpoints == {"0": 2, "2": 0}  # the SDK's own reader sees them

    assert sorted(json.loads(r["body"])["n"] for r in read_events(payload)) == [0, 1, 2, 10]

    # a restart resumes after the checkpoints: only the new event fires
    send_json(connections["event_hubs"], "0", [{"n": 3}])
    (again,) = fire_trigger(EventHubEventTrigger(**trigger.serialize()[1]), 1)
    assert again["partitions"] == {"0": {"first": 3, "last": 3, "count": 1}}


def test_unknown_hub_and_partition_are_refused_with_what_to_fix(connections: dict[str, str], container: str) -> None:
    with pytest.raises(UnknownEventHubError, match=(
        r"^Connection 'azure_event_hubs_default': Event Hub 'no-such-hub' \(consumer group 'analytics'\) at 127\.0\.0\.1:\d+: "
        r"the Event Hub does not exist on this namespace .*Nothing was read and no checkpoint was written\. Check the "
        r"eventhub_name argument")) as caught:
        fire_trigger(EventHubEventTrigger(eventhub_name="no-such-hub", consumer_group="analytics", checkpoint_container=container), 1)
    assert not caught.value.retryable and caught.value.conn_id == "azure_event_hubs_default"
    with pytest.raises(EventTriggerConfigError, match=r"has no partition 9 \(it has 0, 1, 2, 3\); fix partition_ids"):
        fire_trigger(EventHubEventTrigger(eventhub_name=connections["hub"], consumer_group="analytics",
                                   checkpoint_container=container, partition_ids=["9"]), 1)


def test_a_consumer_group_the_hub_does_not_have_is_refused_with_what_to_do(connections: dict[str, str], container: str) -> None:
    """The local endpoint answers 404 for an unknown consumer group, as the service does; the SDK would retry for ever."""
    send_json(connections["event_hubs"], "0", [{"n": 1}])
    trigger = EventHubEventTrigger(eventhub_name=connections["hub"], consumer_group="no-such-group",
                                   checkpoint_container=container, batch_window=1.0)
    with pytest.raises(UnknownConsumerGroupError) as caught:
        fire_trigger(trigger, 1)
    message = str(caught.value)
    assert message.startswith(f"Connection 'azure_event_hubs_default': Event Hub {connections['hub']!r} "
                              "(consumer group 'no-such-group') at 127.0.0.1:")
    assert "consumer group 'no-such-group' does not exist on the hub" in message
    assert "Check the consumer_group argument (or create the group)" in message and not caught.value.retryable


def test_a_queue_namespace_the_connection_does_not_reach_is_refused(connections: dict[str, str], container: str) -> None:
    """``MessageQueueTrigger(queue="eventhubs://<namespace>/<hub>")`` sets ``namespace``; the connection must reach it."""
    from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger

    queue = f"eventhubs://other-ns.servicebus.windows.net/{connections['hub']}"
    path, kwargs = MessageQueueTrigger(queue=queue, consumer_group="analytics", checkpoint_container=container).serialize()
    assert kwargs["namespace"] == "other-ns.servicebus.windows.net"
    with pytest.raises(EventTriggerConfigError, match=(
        r"queue names namespace 'other-ns\.servicebus\.windows\.net' but connection 'azure_event_hubs_default' "
        r"reaches '127\.0\.0\.1:\d+'; use a connection to that namespace"
    )):
        fire_trigger(EventHubEventTrigger(**kwargs), 1)


def test_a_batch_short_of_the_partitions_end_carries_its_lag_from_the_stream(
    connections: dict[str, str], container: str
) -> None:
    send_json(connections["event_hubs"], "1", [{"n": i} for i in range(10)])
    trigger = EventHubEventTrigger(
        eventhub_name=connections["hub"], consumer_group="analytics", checkpoint_container=container,
        batch_size=4, batch_window=1.0,
    )
    first, second = fire_trigger(trigger, 2)
    assert first["partitions"] == {"1": {"first": 0, "last": 3, "count": 4}}
    assert first["lag"] == {"1": {"last_enqueued": 9, "behind": 6}}
    assert second["partitions"]["1"]["first"] == 4 and second["lag"]["1"]["last_enqueued"] == 9
