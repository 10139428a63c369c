"""The state statements of one batch on each supported database (real servers, no hub): upserts,
insert-if-absent, savepoints and the checkpoint compare-and-set behave the same everywhere."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
import sinks
from test_crash_recovery import STATE_TABLES

from airflow_provider_eh.errors import PartitionTakenOverError
from airflow_provider_eh.ingest import IngestEvent, SqlIngestStore, Stream


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def db(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "state.db")
    db = {"postgres": request.getfixturevalue("postgres")} if request.param == "postgres" else {
        "mysql": request.getfixturevalue("mariadb")
    }
    sinks.execute(db, "DROP TABLE IF EXISTS rows_t", *(f"DROP TABLE IF EXISTS eh_ingest_{t}" for t in STATE_TABLES))
    return db


def event(seq: int) -> IngestEvent:
    return IngestEvent(
        partition_id="0", sequence_number=seq, offset=str(seq * 10), enqueued_time=datetime(2026, 1, 1, tzinfo=timezone.utc),
        body=b'{"id": 1}', properties={"eh.group": "g", "eh.seq": seq},
    )


def test_state_statements_of_a_batch(db):
    sinks.execute(db, "CREATE TABLE rows_t (id INTEGER NOT NULL UNIQUE)")
    store = SqlIngestStore(sinks.connect(db), Stream("NS.example", "hub", "$Default"))
    with store.transaction() as tx:
        tx.save_marks("0", {"g": 3, "h": 1})
        tx.save_marks("0", {"g": 7})
        assert tx.marks("0", ["g", "h", "x"]) == {"g": 7, "h": 1}
        tx.dead_letter(event(1), "rejected", "first")
        tx.dead_letter(event(1), "rejected", "second")
        tx.save_session("s", 2, False)
        tx.save_session("s", 3, True)
        assert tx.session("s") == (3, True)
        assert tx.defer("s", 5, event(5)) is True
        assert tx.defer("s", 5, event(6)) is False
        tx.insert_rows("rows_t", [{"id": 1}])
        with pytest.raises(Exception) as refused, tx.savepoint():
            tx.insert_rows("rows_t", [{"id": 1}])
        assert tx.is_driver_error(refused.value)
        tx.insert_rows("rows_t", [{"id": 2}])  # the transaction goes on after the savepoint's rollback
        tx.advance_checkpoint("0", -1, 9, "90", "me")
    with store.transaction() as tx:
        assert tx.take_deferred("s", 5).sequence_number == 5
        assert tx.take_deferred("s", 5) is None
        with pytest.raises(PartitionTakenOverError, match="at sequence number 9 .committed by 'me'., not 4"):
            tx.advance_checkpoint("0", 4, 12, "120", "other")
    with store.transaction() as tx:
        tx.advance_checkpoint("0", 9, 12, "120", "me")
    [letter] = store.dead_letters()
    assert (letter.error, letter.attempts, letter.event.body) == ("second", 2, b'{"id": 1}')
    assert store.checkpoints(["0", "1"])["0"].sequence_number == 12
    assert store.checkpoints(["0", "1"])["1"].sequence_number == -1
    store.close()
    assert sorted(r[0] for r in sinks.query(db, "SELECT id FROM rows_t")) == [1, 2]
