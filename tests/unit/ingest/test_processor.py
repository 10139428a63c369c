"""One batch's transaction on a real SQLite database: dedupe, dead letters, sessions, checkpoint CAS."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from airflow_provider_eh.errors import PartitionTakenOverError, SinkConfigError
from airflow_provider_eh.ingest import (
    BatchProcessor,
    IngestEvent,
    SessionConfig,
    SqlIngestStore,
    complete_session,
    json_rows,
    replay_dead_letters,
)
from tests.support.sql_batches import apply, sqlite_store

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def event(seq: int, body: dict | bytes, partition: str = "0", minutes: float = 0, **props: object) -> IngestEvent:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return IngestEvent(partition, seq, str(seq * 100), T0 + timedelta(minutes=minutes), raw, dict(props))


@pytest.fixture
def store(tmp_path):
    with sqlite_store(tmp_path / "sink.db", "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER)") as store:
        yield store


def ids(store: SqlIngestStore) -> list[int]:
    return [r[0] for r in store.conn.execute("SELECT id FROM orders ORDER BY rowid")]


def test_stamped_event_at_or_below_high_water_mark_is_skipped_across_batches(store):
    processor = BatchProcessor("orders")
    first = [event(0, {"id": 1}, **{"eh.group": "g", "eh.seq": 0}), event(1, {"id": 2}, **{"eh.group": "g", "eh.seq": 1})]
    apply(store, processor, first)
    again = [event(2, {"id": 1}, **{"eh.group": "g", "eh.seq": 1}), event(3, {"id": 3}, **{"eh.group": "g", "eh.seq": 2}),
             event(4, {"id": 4}, **{"eh.group": "other", "eh.seq": 0})]
    result = apply(store, processor, again, expected=1)
    assert result.duplicates == 1 and result.rows == 2
    assert ids(store) == [1, 2, 3, 4]


def test_rejected_event_goes_to_dead_letters_with_position_and_error_and_batch_commits(store):
    def rows(e):
        body = e.json()
        if body["amount"] < 0:
            raise ValueError("negative amount")
        return body

    result = apply(store, BatchProcessor("orders", rows), [event(0, {"id": 1, "amount": 5}), event(1, {"id": 2, "amount": -1})])
    assert result.dead_letters == 1 and ids(store) == [1]
    (letter,) = store.dead_letters()
    assert (letter.event.partition_id, letter.event.sequence_number, letter.event.offset) == ("0", 1, "100")
    assert letter.reason == "rejected" and "negative amount" in letter.error
    assert store.checkpoints(["0"])["0"].sequence_number == 1


def test_row_refused_by_database_is_dead_lettered_alone(store):
    result = apply(store, BatchProcessor("orders"), [event(0, {"id": 1}), event(1, {"id": 1}), event(2, {"id": 2})])
    assert ids(store) == [1, 2]
    assert result.dead_letters == 1
    assert store.dead_letters()[0].reason == "row_rejected"


def test_missing_table_fails_the_batch_instead_of_dead_lettering_everything(store):
    with pytest.raises(SinkConfigError, match="nope"):
        apply(store, BatchProcessor("nope"), [event(0, {"id": 1})])
    assert store.dead_letters() == []
    assert store.checkpoints(["0"])["0"].sequence_number == -1


def test_checkpoint_compare_and_set_refuses_a_stale_batch_and_rolls_it_back(store):
    processor = BatchProcessor("orders")
    apply(store, processor, [event(0, {"id": 1})])
    with pytest.raises(PartitionTakenOverError, match="partition '0'|Partition '0'"):
        apply(store, processor, [event(0, {"id": 1})], expected=-1)
    with pytest.raises(PartitionTakenOverError):
        apply(store, processor, [event(1, {"id": 2})], expected=5)
    assert ids(store) == [1]


def session_processor(**kwargs):
    return BatchProcessor("orders", sessions=SessionConfig.of("property:session", "property:step", **kwargs))


def test_session_event_ahead_of_predecessor_waits_and_is_applied_in_order(store):
    processor = session_processor()
    r1 = apply(store, processor, [event(0, {"id": 12}, session="s", step=2), event(1, {"id": 11}, session="s", step=1)])
    assert r1.deferred == 2 and ids(store) == []
    r2 = apply(store, processor, [event(2, {"id": 10}, session="s", step=0)], expected=1)
    assert r2.released == 2
    assert ids(store) == [10, 11, 12]
    assert store.sessions()["s"] == {"next_sequence": 3, "completed": False, "deferred": []}


def test_deferred_event_older_than_limit_is_dead_lettered_with_the_missing_sequence(store):
    processor = session_processor(defer_limit_seconds=60)
    apply(store, processor, [event(0, {"id": 2}, session="s", step=2, minutes=0)])
    apply(store, processor, [event(1, {"id": 99}, session="other", step=0, minutes=5)], expected=0)
    (letter,) = store.dead_letters()
    assert letter.reason == "session_expired" and "sequence 0" in letter.error and letter.event.sequence_number == 0


def test_completed_session_dead_letters_its_late_and_deferred_events(store):
    processor = session_processor(end="property:last")
    apply(store, processor, [event(0, {"id": 1}, session="s", step=0), event(1, {"id": 2}, session="s", step=1, last="true"),
                             event(2, {"id": 3}, session="s", step=2)])
    assert ids(store) == [1, 2]
    assert [d.reason for d in store.dead_letters()] == ["session_completed"]
    apply(store, processor, [event(3, {"id": 5}, session="t", step=1)], expected=2)
    done = complete_session(store, "t")
    assert done["dead_lettered"] == [1] and store.sessions()["t"]["completed"]


def test_replay_applies_fixed_dead_letter_once(store):
    broken = BatchProcessor("orders", lambda e: (_ for _ in ()).throw(ValueError("bug")))
    apply(store, broken, [event(0, {"id": 1}), event(1, {"id": 2})])
    assert replay_dead_letters(store, broken)["failed"][0][:2] == ["0", 0]
    assert store.dead_letters()[0].attempts == 2
    fixed = BatchProcessor("orders", json_rows(["id"]))
    assert replay_dead_letters(store, fixed, partition_id="0", sequence_numbers=[1])["replayed"] == [["0", 1]]
    assert replay_dead_letters(store, fixed)["replayed"] == [["0", 0]]
    assert replay_dead_letters(store, fixed) == {"replayed": [], "failed": []}
    assert sorted(ids(store)) == [1, 2]
