"""A producer state blob written by the dict-based ledger (version 1) loads in the blob store and goes on
publishing: its committed batches move into records, its in-doubt batch becomes partial, the next batch
numbers on from it."""

from __future__ import annotations

from pathlib import Path

from publish_kit import PublishSetup, assert_exactly_once, batch, events_for

from airflow_provider_eh.publishing import StateKey

FIXTURE = Path(__file__).parents[2] / "unit" / "publishing" / "state_v1_fixture.json"


def test_a_blob_of_the_dict_based_ledger_loads_unchanged_and_publishing_goes_on(setup: PublishSetup) -> None:
    key = StateKey(setup.endpoint.namespace, setup.hub, "g", "0")
    text = FIXTURE.read_text().strip().replace('"namespace":"ns.example","hub":"hub"',
                                               f'"namespace":"{key.namespace}","hub":"{key.hub}"')
    setup.container.upload_blob(key.blob_name, text)
    publisher = setup.publisher()
    assert publisher.store.read(key).committed_count == 2
    events = [dict(e, partition_id="0") for e in events_for("next", 30)]
    result = publisher.publish(events, batch_id=batch("next"))["0"]
    assert (result.status, result.first_seq, result.last_seq) == ("published", 2021, 2050)
    state = publisher.store.read(key)
    assert state.pending is None and state.partial["c" * 64].landed == [] and state.partial["c" * 64].events == 1000
    assert publisher.store.find_committed(key, "b" * 64).first_seq == 16 and state.owner_level == 7
    assert (state.ledger.next, state.ledger.last.batch_id) == (3, batch("next"))  # the two moved, then the new one
    assert_exactly_once(setup.read_back(), events)
