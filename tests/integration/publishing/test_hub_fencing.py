"""The hub fences a stalled publisher: sender links attached as idempotent producers.

Every send link is attached with the capability ``com.microsoft:idempotent-producer``, the producer
group's id and the ledger's owner level (the real SDK against the local endpoint). The events carry
the hub's numbering; a sender of a lower owner level is refused at attach and, once a higher one
attached, at its next send. The stalled-publisher case the claim's deadline cannot cover: a publisher
stopped (SIGSTOP) after its deadline check and before its SDK batch goes out, while another one takes
over, recovers and commits. With the hub's fencing the resumed send is refused and every event is in
the hub once; on an endpoint without the feature (``--no-idempotent-producers``) that one SDK batch
lands twice when it goes out after the resume (the connection may also have died during the pause),
and nothing more or less.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from publish_kit import PublishSetup, assert_exactly_once, batch, events_for

from airflow_provider_eh.client.fencing import PRODUCER_EPOCH, PRODUCER_ID, PRODUCER_SEQUENCE, open_fenced, producer_group_id
from eventhubs_local import EmulatorProcess
from airflow_provider_eh.errors import ProducerDisconnectedError
from tests.conftest import unique_name
from tests.support.paused import wait_stopped


def _annotations(setup: PublishSetup, partition: str, count: int) -> list[dict[bytes, Any]]:
    """The message annotations of a partition's first ``count`` events, read with a plain SDK consumer."""
    import threading

    from azure.eventhub import EventHubConsumerClient

    got: list[dict[bytes, Any]] = []
    done = threading.Event()

    def on_batch(context: Any, batch: list[Any]) -> None:
        for event in batch:
            got.append({bytes(k) if isinstance(k, (bytes, bytearray)) else str(k).encode(): v
                        for k, v in event.raw_amqp_message.annotations.items()})
        if len(got) >= count:
            done.set()

    client = EventHubConsumerClient.from_connection_string(
        setup.event_hubs.connection_string(setup.hub), consumer_group="$Default", eventhub_name=setup.hub)
    worker = threading.Thread(target=client.receive_batch, kwargs=dict(
        on_event_batch=on_batch, partition_id=partition, starting_position="-1", max_wait_time=1), daemon=True)
    worker.start()
    try:
        assert done.wait(60), f"read {len(got)} of {count} events of partition {partition}"
    finally:
        client.close()
        worker.join(30)
    return got[:count]


def test_sends_go_out_as_an_idempotent_producer_numbered_by_the_hub(setup: PublishSetup) -> None:
    events = events_for("fence", 60, partitions=2)
    publisher = setup.publisher()
    first = publisher.publish(events[:30], batch_id=batch("fence-1"))
    second = publisher.publish(events[30:], batch_id=batch("fence-2"))
    assert {r.fencing for r in (*first.values(), *second.values())} == {"hub"}
    read = setup.read_back()
    assert_exactly_once(read, events)
    for partition in ("0", "1"):
        notes = _annotations(setup, partition, 30)
        # one producer group, the ledger's owner level of each batch (each claim raises it), the hub's
        # contiguous numbering across both batches
        assert {n[PRODUCER_ID] for n in notes} == {producer_group_id("g")}
        assert [n[PRODUCER_SEQUENCE] for n in notes] == list(range(30))
        assert [n[PRODUCER_EPOCH] for n in notes] == [1] * 15 + [2] * 15


def test_a_higher_owner_level_fences_an_attached_sender_and_refuses_a_lower_one(setup: PublishSetup) -> None:
    from azure.eventhub import EventData

    def event(link: Any, body: bytes) -> EventData:
        out = EventData(body)
        out.raw_amqp_message.annotations.update(link.annotations(link.take()))
        return out

    endpoint = setup.endpoint
    with endpoint.producer(retry_total=0) as old, endpoint.producer(retry_total=0) as new, \
            endpoint.producer(retry_total=0) as older:
        old_link = open_fenced(old, "0", group="g", owner_level=3)
        assert old_link is not None and old_link.last_sequence == -1
        old.send_batch([event(old_link, b"before")], partition_id="0")
        new_link = open_fenced(new, "0", group="g", owner_level=4)
        assert new_link is not None and new_link.last_sequence == 0  # the hub's answer: what it stored
        with pytest.raises(Exception) as sent:
            old.send_batch([event(old_link, b"late")], partition_id="0")
        assert "producer-epoch-stolen" in str(sent.value)
        with pytest.raises(ProducerDisconnectedError, match="fenced at the hub"):
            open_fenced(older, "0", group="g", owner_level=3)
    assert [e.body for e in setup.read_back()] == [b"before"]


def _stall_between_check_and_send(setup: PublishSetup, name: str, *, fenced_by: str) -> tuple[list[Any], list[Any], Any, str]:
    """A publisher stopped after its deadline check of SDK batch 2; a takeover; the first resumed."""
    events = events_for(name, 8000, partitions=1, size=480)  # ~4 MB on one partition: several SDK batches
    batch_id = batch(name)
    first = setup.start(events, batch_id, pause_at="before_send:2")
    try:
        wait_stopped(first.pid)
        landed_before = len(setup.read_back())
        assert 0 < landed_before < len(events)
        result = setup.publisher(claim_timeout=60).publish(events, batch_id=batch_id)["0"]
        assert (result.status, result.landed_count, result.fencing) == ("recovered", landed_before, fenced_by)
    finally:
        first.send_signal(signal.SIGCONT)
    _out, err = first.communicate(timeout=120)
    assert first.returncode != 0, "the resumed publisher must stop, not finish"
    return events, setup.read_back(), result, err


def test_a_publisher_paused_between_its_check_and_its_send_is_refused_by_the_hub(setup: PublishSetup) -> None:
    events, read, _result, err = _stall_between_check_and_send(setup, "fenced-stall", fenced_by="hub")
    assert "fenced at the hub" in err, err[-3000:]
    assert_exactly_once(read, events)


def test_without_the_hubs_fencing_at_most_the_one_batch_in_flight_lands_twice(setup: PublishSetup, azurite: Any,
                                                                              container: str, tmp_path: Path) -> None:
    """The claim's deadline alone: the resumed publisher sends at most the batch it had checked for, then stops.

    Whether that batch lands again depends on its connection: kept through the pause, the send goes out
    and lands twice; lost during the pause, the send fails and its retry stops at the deadline. Both end
    with the publisher stopped by its deadline or its failed send, nothing lost, and at most that one
    batch twice; without the deadline check it would send every batch left.
    """
    with EmulatorProcess(tmp_path / "no-fencing", extra_args=["--no-idempotent-producers"]) as plain:
        hub = unique_name("plain")
        plain.admin.create_hub(hub, partitions=1)
        on_plain = PublishSetup(plain, azurite, hub, container)
        events, read, _result, err = _stall_between_check_and_send(on_plain, "lease-stall", fenced_by="lease")
    ids = Counter(json.loads(e.body)["id"] for e in read)
    twice = sorted(int(i.rsplit("-", 1)[1]) for i, n in ids.items() if n > 1)
    assert set(ids) == {e["body"]["id"] for e in events} and set(ids.values()) <= {1, 2}  # nothing lost
    # at most the SDK batch that was in flight: one run of consecutive events, at most 1 MiB of them
    assert twice == list(range(twice[0], twice[0] + len(twice))) if twice else True
    assert len(twice) * 480 <= 1024 * 1024
    # stopped at its next check (after the send, or at the retry of a send that failed), or by the failed send
    assert "deadline passed" in err or "Traceback" in err, err[-3000:]


def test_a_producer_client_kept_between_sends_sends_plainly_again_with_fencing_off(setup: PublishSetup) -> None:
    """Spark workers keep their producer clients between tasks: a fenced send, then one with fencing off."""
    from airflow_provider_eh.publishing import Fingerprint, send_partition

    events = events_for("kept", 20, partitions=1)
    with setup.endpoint.producer(retry_total=0) as client:
        for fencing, part in (("auto", events[:10]), (False, events[10:])):
            publisher = setup.publisher(hub_fencing=fencing)
            outgoing = publisher.prepare(part)["0"]
            fp = Fingerprint()
            for event in outgoing:
                fp.update(event.body, event.properties)
            session = publisher.begin("0", batch(f"kept-{fencing}"), fp.count, fp.hexdigest())
            report = send_partition(setup.endpoint, session.plan, outgoing, producer=client)
            assert publisher.commit(session, report).fencing == ("hub" if fencing == "auto" else "lease")
    assert_exactly_once(setup.read_back(), events)
    notes = _annotations(setup, "0", 20)
    assert [PRODUCER_SEQUENCE in n for n in notes] == [True] * 10 + [False] * 10


def test_a_lost_acknowledgement_on_a_fenced_link_is_healed_by_the_hubs_numbering(setup: PublishSetup) -> None:
    """The SDK's ``send_batch`` sends once more after a timeout whatever ``retry_total`` says; on a fenced
    link that resend carries the same producer sequence numbers and the hub acknowledges what it stored."""
    events = events_for("no-ack", 40, partitions=1)
    setup.event_hubs.admin.set_fault("store_no_ack", hub=setup.hub)
    try:
        result = setup.publisher(send_timeout=2.0, send_attempts=1).publish(events, batch_id=batch("no-ack"))["0"]
        (fault,) = setup.event_hubs.admin.faults()
    finally:
        setup.event_hubs.admin.clear_faults()
    assert fault["triggered"] >= 1  # the first acknowledgement was withheld
    assert (result.status, result.fencing, result.events) == ("published", "hub", 40)
    assert_exactly_once(setup.read_back(), events)
