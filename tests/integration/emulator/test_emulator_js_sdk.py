"""Microsoft's JavaScript SDK (@azure/event-hubs 6) against the local endpoint: producer, management,
consumer from every starting position, owner levels and the injected faults. What the JS client
publishes is counted by reading it back with the Python SDK, and the reverse.

Each test runs one node process (``js/client.mjs``) for all of its JS steps; the script ends itself
after its time limit so a client that hangs (as on CBS auth before the endpoint read 6-field
transfers) fails in seconds with the step it hung in.
"""

from __future__ import annotations

import json
import time

from azure.eventhub import EventData, EventHubProducerClient


def _bodies(events):
    """Bodies as the JS producer sent them (it writes a string body as JSON into a data section)."""
    return [json.loads(e.body_as_str()) for e in events]


def test_js_producer_batches_keys_and_partition_ids_land_once_and_management_agrees(hub, emulator, js, receive):
    keyed = [f"key-{i}" for i in range(4)]
    sent, properties = js(emulator, hub.name, [
        {"op": "send", "sends": [
            {"bodies": ["p2-a", "p2-b", "p2-c"], "partitionId": "2"},
            {"bodies": keyed, "partitionKey": "customer-7"},
            {"bodies": ["round-robin"]},
        ], "single": {"bodies": ["array-p3"], "options": {"partitionId": "3"}}},
        {"op": "properties"},
    ])
    assert sent["sent"] == [3, 4, 1, 1]

    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        python_view = {p: producer.get_partition_properties(p) for p in ("0", "1", "2", "3")}
    counts = {p: v["last_enqueued_sequence_number"] + 1 for p, v in python_view.items()}
    stored = {p: receive(hub.conn_str, p, n) if n else [] for p, n in counts.items()}
    everything = [b for events in stored.values() for b in _bodies(events)]
    assert sorted(everything) == sorted(["p2-a", "p2-b", "p2-c", *keyed, "round-robin", "array-p3"])
    assert _bodies(stored["2"])[:3] == ["p2-a", "p2-b", "p2-c"]
    assert "array-p3" in _bodies(stored["3"])
    keyed_partitions = [p for p, events in stored.items() if set(keyed) & set(_bodies(events))]
    assert len(keyed_partitions) == 1, "events of one partition key landed on several partitions"
    assert [b for b in _bodies(stored[keyed_partitions[0]]) if b in keyed] == keyed
    assert all(e.partition_key == b"customer-7" or e.partition_key == "customer-7"
               for e, body in zip(stored[keyed_partitions[0]], _bodies(stored[keyed_partitions[0]])) if body in keyed)

    assert properties["name"] == hub.name
    assert properties["partitionIds"] == ["0", "1", "2", "3"]
    by_id = {p["partitionId"]: p for p in properties["partitions"]}
    for pid, events in stored.items():
        assert by_id[pid]["lastEnqueuedSequenceNumber"] == len(events) - 1
        assert by_id[pid]["lastEnqueuedSequenceNumber"] == python_view[pid]["last_enqueued_sequence_number"]
        assert by_id[pid]["isEmpty"] is (not events)  # a boolean, as the service sends it
        assert by_id[pid]["beginningSequenceNumber"] == 0


def test_js_consumer_starts_at_every_position_the_sdk_offers(hub, emulator, js, receive):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        producer.send_batch([EventData(f"e{i}") for i in range(5)], partition_id="0")
        time.sleep(0.05)  # the second batch gets a later enqueued time
        producer.send_batch([EventData(f"e{i}") for i in range(5, 10)], partition_id="0")
    events = receive(hub.conn_str, "0", 10)
    assert len(events) == 10
    offset5 = events[5].offset
    enqueued4_ms = int(events[4].enqueued_time.timestamp() * 1000)

    reads = [
        {"start": "earliest", "count": 10},
        {"start": {"sequenceNumber": 3, "isInclusive": True}, "count": 7},
        {"start": {"sequenceNumber": 3}, "count": 6},
        {"start": {"offset": offset5, "isInclusive": True}, "count": 5},
        {"start": {"offset": offset5}, "count": 4},
        {"start": {"enqueuedOn": enqueued4_ms}, "count": 5},
        {"start": "latest", "count": 2, "sendWhileSubscribed": {"afterMs": 1500, "bodies": ["late-1", "late-2"]}},
    ]
    for read in reads:
        read.update(partitionId="0", waitMs=read.get("waitMs", 4000))
    (result,) = js(emulator, hub.name, [{"op": "receive", "reads": reads}], timeout=60)
    got = [r["bodies"] for r in result["reads"]]
    assert all(not r["errors"] for r in result["reads"]), result["reads"]
    names = [f"e{i}" for i in range(10)]
    assert got[0] == names
    assert got[1] == names[3:]
    assert got[2] == names[4:]
    assert got[3] == names[5:]
    assert got[4] == names[6:]
    assert got[5] == names[5:]
    assert got[6] == ["late-1", "late-2"]


def test_js_higher_owner_level_takes_the_partition_from_a_lower_one(hub, emulator, js):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        producer.send_batch([EventData(f"o{i}") for i in range(3)], partition_id="1")
    (result,) = js(emulator, hub.name, [{"op": "ownerLevels", "consumerGroup": "analytics", "partitionId": "1",
                                         "count": 3}])
    assert result["firstEvents"] == 3
    assert result["secondEvents"] == 3 and not result["secondErrors"]
    assert result["firstErrors"], "the owner-level-1 receiver was never told it lost the partition"
    assert result["firstErrors"][0]["code"] == "ReceiverDisconnectedError", result["firstErrors"]


def _last_seq(hub, partition):
    with EventHubProducerClient.from_connection_string(hub.conn_str) as producer:
        return producer.get_partition_properties(partition)["last_enqueued_sequence_number"]


def test_js_producer_sees_each_injected_fault_as_the_service_would_show_it(hub, emulator, js):
    no_retry = {"retryOptions": {"maxRetries": 0, "timeoutInMs": 3000}}
    results = js(emulator, hub.name, [
        {"op": "fault", "kind": "server_busy", "hub": hub.name},
        {"op": "send", "sends": [{"bodies": ["busy"], "partitionId": "0"}], "clientOptions": no_retry},
        {"op": "clearFaults"},
        {"op": "fault", "kind": "drop_after", "hub": hub.name, "params": {"transfers": 1}},
        {"op": "send", "sends": [{"bodies": ["lost-ack"], "partitionId": "1"}], "clientOptions": no_retry},
        {"op": "fault", "kind": "store_no_ack", "hub": hub.name},
        {"op": "send", "sends": [{"bodies": ["unacknowledged"], "partitionId": "2"}], "clientOptions": no_retry},
        {"op": "clearFaults"},
        {"op": "fault", "kind": "delay_ack", "hub": hub.name, "params": {"ms": 1500}},
        {"op": "send", "sends": [{"bodies": ["slow"], "partitionId": "3"}]},
        {"op": "clearFaults"},
    ], timeout=60)
    busy, dropped, unacked, delayed = (results[i] for i in (1, 4, 6, 9))
    assert busy["error"]["code"] == "ServerBusyError", busy
    assert _last_seq(hub, "0") == -1  # refused, not stored

    assert dropped["sent"] is None and dropped["error"], dropped
    assert _last_seq(hub, "1") == 0  # stored although the client saw a failure

    assert unacked["sent"] is None and unacked["elapsedMs"] >= 2500, unacked
    assert _last_seq(hub, "2") == 0

    assert delayed["sent"] == [1] and delayed["elapsedMs"] >= 1400, delayed
    assert _last_seq(hub, "3") == 0
