"""The engine against the local endpoint and Azurite: re-runs, another run's crash, two publishers,
changed content, bad input and broken state, each proved by reading the hub back."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from publish_kit import PublishSetup, assert_exactly_once, batch, events_for

from airflow_provider_eh.errors import (
    BatchContentChangedError,
    EventTooLargeError,
    InvalidEventError,
    InvalidProducerStateError,
    ProducerDisconnectedError,
    UnknownEventHubError,
)
from airflow_provider_eh.publishing import Fingerprint, PartitionOptions, normalise, send_partition
from airflow_provider_eh.publishing.document import StateKey


def crash_partway(setup: PublishSetup, events: list[dict[str, Any]], batch_id: str, partition: str, after: int) -> None:
    """Begin a batch on one partition, let the send die after ``after`` events, leave its intent pending."""
    publisher = setup.publisher()
    outgoing = [normalise(e, i, ["0", "1", "2", "3"])[1] for i, e in enumerate(events)]
    fp = Fingerprint()
    for e in outgoing:
        fp.update(e.body, e.properties)
    session = publisher.begin(partition, batch_id, fp.count, fp.hexdigest())

    def dying() -> Iterator[Any]:
        for i, e in enumerate(outgoing):
            if i == after:
                raise RuntimeError("worker lost")
            yield e

    with pytest.raises(RuntimeError):
        send_partition(setup.endpoint, session.plan, dying())
    publisher.abort(session)


def test_rerun_of_same_interval_publishes_nothing_and_returns_recorded_result(setup: PublishSetup) -> None:
    events = events_for("a", 200)
    first = setup.publisher().publish(events, batch_id=batch("day1"))
    again = setup.publisher().publish(events, batch_id=batch("day1"))
    assert {p: r.sequence_range() for p, r in again.items()} == {p: r.sequence_range() for p, r in first.items()}
    assert {r.status for r in again.values()} == {"already_committed"}
    assert_exactly_once(setup.read_back(), events)


def test_new_interval_appends_and_new_generation_republishes(setup: PublishSetup) -> None:
    day1, day2 = events_for("d1", 100), events_for("d2", 100)
    setup.publisher().publish(day1, batch_id=batch("day1"))
    second = setup.publisher().publish(day2, batch_id=batch("day2"))
    assert second["0"].first_seq == 25 and second["0"].status == "published"
    assert_exactly_once(setup.read_back(), day1 + day2)
    from airflow_provider_eh.publishing import derive_batch_id

    gen1 = derive_batch_id("g", "dag", "day1", logical_date="2026-01-01T00:00:00+00:00", generation=1)
    setup.publisher().publish(day1, batch_id=gen1)
    ids = [json.loads(e.body)["id"] for e in setup.read_back()]
    assert len(ids) == 300 and ids.count("d1-0") == 2


def test_crashed_batch_is_resolved_partial_by_another_run_and_its_retry_sends_only_missing(setup: PublishSetup) -> None:
    day_a = [dict(e, partition_id="0") for e in events_for("A", 1000, size=3000)]
    day_b = [dict(e, partition_id="0") for e in events_for("B", 50)]
    crash_partway(setup, day_a, batch("A"), "0", after=600)
    landed_before = len(setup.read_back())
    assert 0 < landed_before < 1000

    b = setup.publisher().publish(day_b, batch_id=batch("B"))["0"]
    assert b.status == "published"
    state = setup.publisher().store.read(StateKey(setup.endpoint.namespace, setup.hub, "g", "0"))
    assert state is not None and batch("A") in state.partial and state.pending is None

    a = setup.publisher().publish(day_a, batch_id=batch("A"))["0"]
    assert (a.status, a.landed_count, a.resent) == ("recovered", landed_before, 1000 - landed_before)
    assert_exactly_once(setup.read_back(), day_a + day_b)


def test_second_publisher_on_same_partition_is_disconnected_and_nothing_duplicates(setup: PublishSetup) -> None:
    big = [dict(e, partition_id="0") for e in events_for("big", 3000, size=1000)]
    other = [dict(e, partition_id="0") for e in events_for("other", 10)]
    errors: list[BaseException] = []
    claimed = threading.Event()
    first = setup.publisher()
    original = first.store.claim

    def claim_and_signal(*args: Any, **kwargs: Any) -> Any:
        claim = original(*args, **kwargs)
        claimed.set()
        return claim

    first.store.claim = claim_and_signal  # type: ignore[method-assign]
    thread = threading.Thread(target=lambda: first.publish(big, batch_id=batch("big")))
    thread.start()
    assert claimed.wait(30)
    try:
        setup.publisher().publish(other, batch_id=batch("other"))
    except ProducerDisconnectedError as exc:
        errors.append(exc)
    thread.join(120)
    assert len(errors) == 1 and "lease" in str(errors[0])
    assert_exactly_once(setup.read_back(), big)


def test_lost_lease_stops_the_sender_and_the_retry_recovers(setup: PublishSetup) -> None:
    from azure.storage.blob import BlobLeaseClient

    events = [dict(e, partition_id="1") for e in events_for("lease", 3000, size=1000)]
    publisher = setup.publisher()
    outgoing = [normalise(e, i, ["0", "1", "2", "3"])[1] for i, e in enumerate(events)]
    fp = Fingerprint()
    for e in outgoing:
        fp.update(e.body, e.properties)
    session = publisher.begin("1", batch("lease"), fp.count, fp.hexdigest())
    blob = setup.container.get_blob_client(session.key.blob_name)

    def breaking() -> Iterator[Any]:
        for i, e in enumerate(outgoing):
            if i == 1500:
                BlobLeaseClient(blob).break_lease(lease_break_period=0)
                session.claim.lease.renew = lambda: (_ for _ in ()).throw(RuntimeError("lease broken"))  # type: ignore[method-assign]
                session.claim.mark_lost("lease broken")
            yield e

    with pytest.raises(ProducerDisconnectedError, match="lost ownership"):
        send_partition(setup.endpoint, session.plan, breaking(), stop_check=session.check)
    publisher.abort(session)
    assert 0 < len(setup.read_back()) < 3000
    result = setup.publisher().publish(events, batch_id=batch("lease"))["1"]
    assert result.status == "recovered"
    assert_exactly_once(setup.read_back(), events)


def test_retry_with_changed_content_fails_and_sends_nothing(setup: PublishSetup) -> None:
    events = [dict(e, partition_id="2") for e in events_for("c", 1000, size=3000)]
    crash_partway(setup, events, batch("c"), "2", after=600)
    landed = len(setup.read_back())
    changed = [dict(e) for e in events]
    changed[5] = dict(changed[5], body={"id": "c-5", "pad": "changed"})
    with pytest.raises(BatchContentChangedError, match="bump `generation`"):
        setup.publisher().publish(changed, batch_id=batch("c"))
    assert len(setup.read_back()) == landed
    setup.publisher().publish(events, batch_id=batch("c"))
    assert_exactly_once(setup.read_back(), events)
    with pytest.raises(BatchContentChangedError):
        setup.publisher().publish(changed, batch_id=batch("c"))


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        ({"body": "x" * (1024 * 1024), "partition_id": "1"}, EventTooLargeError, "event 3 .partition 1"),
        ({"body": "x", "partition_id": "9"}, InvalidEventError, "event 3: partition '9' does not exist"),
        ({"body": object(), "partition_id": "1"}, InvalidEventError, "event 3: field 'body'"),
        ({"body": "x", "partition_key": 1.5}, InvalidEventError, "event 3: field 'partition_key' is a float"),
        ({"body": "x", "partition_id": "1", "properties": {"eh.seq": 1}}, InvalidEventError, "reserved prefix"),
    ],
)
def test_bad_event_fails_before_anything_is_sent(setup: PublishSetup, bad: dict, error: type, message: str) -> None:
    earlier = events_for("before", 8)
    setup.publisher().publish(earlier, batch_id=batch("before"))
    states = {b.name: b.etag for b in setup.container.list_blobs()}
    events: list[Any] = events_for("ok", 6)
    events[3] = bad
    with pytest.raises(error, match=message):
        setup.publisher().publish(events, batch_id=batch("bad"))
    assert_exactly_once(setup.read_back(), earlier)  # nothing of the bad batch, the earlier one still once
    assert {b.name: b.etag for b in setup.container.list_blobs()} == states  # no claim, no intent written


def test_unknown_hub_and_unknown_partition_option_are_named(setup: PublishSetup) -> None:
    from dataclasses import replace

    publisher = setup.publisher()
    publisher.endpoint = replace(setup.endpoint, eventhub_name="no-such-hub")
    with pytest.raises(UnknownEventHubError, match="no-such-hub"):
        publisher.publish(events_for("x", 4), batch_id=batch("x"))
    from airflow_provider_eh.errors import UnknownPartitionError

    with pytest.raises(UnknownPartitionError, match=r"has no partition 7 \(it has 0, .*\); fix partition_options"):
        setup.publisher(partition_options={"7": PartitionOptions(owner_level=3)}).publish(events_for("x", 4), batch_id=batch("x"))


@pytest.mark.parametrize(
    ("content", "message"),
    [("not json", "is not JSON"), ('{"version": 99}', "version 99"),
     ('{"version": 1, "namespace": "x", "hub": "other", "group": "g", "partition": "0"}', "belongs to hub x/other")],
)
def test_corrupt_or_foreign_state_blob_is_named_with_how_to_reset(setup: PublishSetup, content: str, message: str) -> None:
    key = StateKey(setup.endpoint.namespace, setup.hub, "g", "0")
    setup.container.upload_blob(key.blob_name, content)
    with pytest.raises(InvalidProducerStateError, match=message) as info:
        setup.publisher().publish(events_for("s", 4), batch_id=batch("s"))
    # a broken state is reset by deleting it; another hub's state is valid there: use another group instead
    advice = "give this task its own producer_group" if "belongs to" in message else "delete blob"
    assert key.blob_name in str(info.value) and advice in str(info.value)
    assert setup.read_back() == [] or all(e.partition != "0" for e in setup.read_back())


def test_partition_options_and_publishing_properties(setup: PublishSetup) -> None:
    options = {"0": PartitionOptions(owner_level=7, starting_sequence_number=1000), "1": PartitionOptions(producer_group="side")}
    events = events_for("o", 8)
    results = setup.publisher(partition_options=options).publish(events, batch_id=batch("o"))
    assert results["0"].first_seq == 1000
    props = setup.publisher(partition_options=options).get_partition_publishing_properties("0")
    assert props == {"partition_id": "0", "idempotent": True, "producer_group": "g", "owner_level": 7,
                     "last_published_sequence_number": 1001}
    assert setup.publisher(partition_options=options).get_partition_publishing_properties("1")["producer_group"] == "side"
    read = setup.read_back()
    assert {e.properties["eh.group"] for e in read if e.partition == "1"} == {"side"}
    assert {e.properties["eh.owner"] for e in read if e.partition == "0"} == {7}
    with pytest.raises(ProducerDisconnectedError, match="owner level 3"):
        setup.publisher(partition_options={"0": PartitionOptions(owner_level=3)}).publish(events, batch_id=batch("o2"))


def test_user_properties_of_every_type_arrive_as_sent_beside_the_stamps(setup: PublishSetup) -> None:
    props = {"small": 7, "big": 2**40, "negative": -(2**63), "ratio": 0.25, "flag": True, "text": "é" * 300,
             "raw": b"\x00\x01", "none": None}
    events = [{"body": f"p-{i}".encode(), "partition_id": "2", "properties": {**props, "i": i}} for i in range(300)]
    results = setup.publisher().publish(events, batch_id=batch("props"))
    assert results["2"].events == 300
    read = setup.read_back()
    assert [e.body for e in read] == [e["body"] for e in events]
    for i, e in enumerate(read):
        assert {k: e.properties[k] for k in props} == {**props, "raw": "\x00\x01"}  # read_hub decodes bytes to str
        assert e.properties["i"] == i and e.properties["eh.seq"] == i and e.properties["eh.group"] == "g"
