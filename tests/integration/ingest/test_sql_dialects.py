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


ROWS = [
    {"id": 1, "txt": "", "flag": True, "n": 1.5, "at": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc)},
    {"id": 2, "txt": None, "flag": False, "n": float("inf"), "at": None},
    {"id": 3, "txt": "\\N", "flag": None, "n": -0.25, "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)},
    {"id": 4, "txt": 'comma, "quote"\nand a new line', "flag": True, "n": None, "at": None},
    {"id": 5, "txt": "true", "flag": False, "n": 1e300, "at": None},
]


def test_rows_of_a_batch_are_stored_as_the_same_values_one_by_one_or_in_bulk(db):
    """Postgres writes a batch's rows with COPY and single rows with INSERT: both give the same values."""
    postgres = isinstance(db, dict) and "postgres" in db
    sinks.execute(db, "CREATE TABLE rows_t (id INTEGER NOT NULL, txt TEXT, flag BOOLEAN, n DOUBLE PRECISION, "
                      + ("at TIMESTAMP WITH TIME ZONE, flag_text TEXT)" if postgres else "at VARCHAR(40), flag_text TEXT)"))
    store = SqlIngestStore(sinks.connect(db), Stream("ns", "hub", "$Default"))
    rows = [{**row, "flag_text": row["flag"]} for row in ROWS]
    if not postgres:  # SQLite and MariaDB store times as text here
        rows = [{**row, "at": None if row["at"] is None else row["at"].isoformat()} for row in rows]
        rows = [{**row, "n": None if row["n"] == float("inf") else row["n"]} for row in rows]  # no infinity there
    with store.transaction() as tx:
        tx.insert_rows("rows_t", rows)  # in bulk
        tx.insert_rows("rows_t", [{**row, "id": row["id"] + 100} for row in rows][:1])  # one row
        for row in rows[1:]:
            tx.insert_rows("rows_t", [{**row, "id": row["id"] + 100}])
    stored = sinks.query(db, "SELECT id, txt, flag, n, at, flag_text FROM rows_t ORDER BY id")
    bulk = {r[0]: r[1:] for r in stored if r[0] < 100}
    single = {r[0] - 100: r[1:] for r in stored if r[0] > 100}
    assert bulk == single and len(bulk) == len(ROWS)
    assert bulk[1][0] == "" and bulk[2][0] is None and bulk[3][0] == "\\N"  # empty text, NULL and \N stay apart
    assert bulk[4][0] == 'comma, "quote"\nand a new line'
    if postgres:
        assert [bulk[i][1] for i in range(1, 6)] == [True, False, None, True, False]
        assert bulk[1][4] == "true" and bulk[2][4] == "false"  # a boolean into text reads as Postgres spells it
        assert bulk[2][2] == float("inf") and bulk[1][3] == ROWS[0]["at"]


def test_a_postgres_batch_of_values_copy_cannot_carry_goes_through_insert(postgres):
    db = {"postgres": postgres}
    sinks.execute(db, "DROP TABLE IF EXISTS rows_t", "CREATE TABLE rows_t (id INTEGER NOT NULL, raw BYTEA, txt TEXT)")
    store = SqlIngestStore(sinks.connect(db), Stream("ns", "hub", "$Default"))
    with store.transaction() as tx:
        tx.insert_rows("rows_t", [{"id": 1, "raw": b"\x00\xff", "txt": "a"}, {"id": 2, "raw": None, "txt": "b"}])
    stored = sinks.query(db, "SELECT id, raw, txt FROM rows_t ORDER BY id")
    assert [(i, raw if raw is None else bytes(raw), txt) for i, raw, txt in stored] == [(1, b"\x00\xff", "a"), (2, None, "b")]
    with pytest.raises(Exception, match="0x00"), store.transaction() as tx:  # NUL in text: refused by INSERT, by name
        tx.insert_rows("rows_t", [{"id": 3, "raw": None, "txt": "a\x00b"}, {"id": 4, "raw": None, "txt": "c"}])
