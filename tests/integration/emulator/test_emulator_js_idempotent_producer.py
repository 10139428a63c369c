"""Seed 000's service side, driven by Microsoft's JavaScript SDK (EventHubBufferedProducerClient with
``enableIdempotentRetries``): a retry after a dropped connection stores nothing twice, a higher owner
level fences the producer group's older sender, and the group's state survives a restart."""

from __future__ import annotations

import json


def _bodies(events):
    return [json.loads(e.body_as_str()) for e in events]


def test_js_idempotent_producer_retries_across_a_dropped_connection_and_stores_each_event_once(
    hub, emulator, js, receive
):
    emulator.admin.set_fault("drop_after", hub=hub.name, transfers=1)
    bodies = [f"i{i}" for i in range(5)]
    # the JS client retries a send whose connection dropped after its operation timeout (default 60 s)
    fast_retry = {"retryOptions": {"retryDelayInMs": 200, "timeoutInMs": 3000}}
    (result,) = js(emulator, hub.name, [{"op": "idempotentSend", "partitionId": "0", "rounds": [bodies, ["i5"]],
                                         "clientOptions": fast_retry}], timeout=45)
    assert emulator.admin.faults() == []  # the connection was dropped after the first delivery was stored
    assert not result["errors"], result["errors"]
    assert result["publishing"]["isIdempotentPublishingEnabled"] is True
    assert result["publishing"]["lastPublishedSequenceNumber"] == 5  # as the service answered the attach

    stored = receive(hub.conn_str, "0", 12, timeout=4)
    assert _bodies(stored) == [*bodies, "i5"]  # the retried delivery was acknowledged, not stored again


def test_js_higher_owner_level_fences_the_producer_group_s_older_sender(hub, emulator, js, receive):
    (result,) = js(emulator, hub.name, [{"op": "idempotentFence", "partitionId": "1",
                                         "clientOptions": {"retryOptions": {"timeoutInMs": 3000}}}], timeout=45)
    before, after = result["before"], result["after"]
    assert after["producerGroupId"] == before["producerGroupId"]
    assert after["ownerLevel"] == before["ownerLevel"] + 1
    assert not result["secondErrors"], result["secondErrors"]
    assert result["firstErrors"] and result["firstErrors"][0]["code"] == "ProducerDisconnectedError", result
    assert _bodies(receive(hub.conn_str, "1", 3, timeout=4)) == ["first-1", "second-1"]


def test_js_producer_group_state_survives_a_restart(private_emulator, js, receive):
    em = private_emulator(hubs={"idem": 1})
    (first,) = js(em, "idem", [{"op": "idempotentSend", "partitionId": "0", "rounds": [["r0", "r1", "r2"]]}])
    group = first["publishing"]["producerGroupId"]

    em.restart()
    # a producer of the group that knows only r0 and r1 were acknowledged sends r2 again, then r3
    (second,) = js(em, "idem", [{"op": "idempotentSend", "partitionId": "0", "rounds": [["r2-again", "r3"]],
                                 "partitionOptions": {"producerGroupId": group, "ownerLevel": 0,
                                                      "startingSequenceNumber": 1}}])

    assert second["publishing"]["producerGroupId"] == group
    assert second["publishing"]["lastPublishedSequenceNumber"] == 3
    # r2-again (sequence number 2) is what the service stored before the restart: dropped, not stored twice
    assert _bodies(receive(em.connection_string("idem"), "0", 5, timeout=4)) == ["r0", "r1", "r2", "r3"]


def test_the_providers_fenced_links_and_the_js_idempotent_producer_share_one_producer_group(hub, emulator, js, receive):
    """The provider's sender links (client.fencing) speak the same link properties and annotations as
    Microsoft's JavaScript SDK: each continues the other's numbering, and a higher owner level of
    either fences the other."""
    import pytest
    from azure.eventhub import EventData, EventHubProducerClient

    from airflow_provider_eh.client.fencing import open_fenced, producer_group_id
    from airflow_provider_eh.errors import ProducerDisconnectedError

    group = "orders_dag.publish"
    group_id = producer_group_id(group)

    def annotated(link, body):
        event = EventData(json.dumps(body))  # JSON, as the JavaScript SDK encodes a string body
        event.raw_amqp_message.annotations.update(link.annotations(link.take()))
        return event

    with EventHubProducerClient.from_connection_string(hub.conn_str, retry_total=0) as client:
        link = open_fenced(client, "0", group=group, owner_level=1)
        assert link is not None and link.last_sequence == -1
        client.send_batch([annotated(link, f"py-{i}") for i in range(3)], partition_id="0")

        # the JS SDK joins the group at a higher owner level: the hub answers it with Python's numbering
        (result,) = js(emulator, hub.name, [{"op": "idempotentSend", "partitionId": "0", "rounds": [["js-0"]],
                                             "partitionOptions": {"producerGroupId": group_id, "ownerLevel": 2}}])
        assert not result["errors"], result["errors"]
        publishing = result["publishing"]
        assert (publishing["producerGroupId"], publishing["ownerLevel"], publishing["lastPublishedSequenceNumber"]) == (
            group_id, 2, 3)

        # the provider's older link is refused, and so is a new one at the old owner level
        with pytest.raises(Exception, match="producer-epoch-stolen"):
            client.send_batch([annotated(link, "py-late")], partition_id="0")
        with pytest.raises(ProducerDisconnectedError, match="fenced at the hub"):
            open_fenced(client, "0", group=group, owner_level=1)

        # a higher owner level of the provider takes the group back and continues after JS's event
        taken = open_fenced(client, "0", group=group, owner_level=3)
        assert taken is not None and taken.last_sequence == 3
        client.send_batch([annotated(taken, "py-3")], partition_id="0")

    assert _bodies(receive(hub.conn_str, "0", 6, timeout=4)) == ["py-0", "py-1", "py-2", "js-0", "py-3"]
