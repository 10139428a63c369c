"""The state statements of one batch on each supported database (real servers, no hub): upserts,
insert-if-absent, savepoints and the checkpoint compare-and-set behave the same everywhere."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest
import sinks
from test_crash_recovery import STATE_TABLES

from airflow_provider_eh.errors import PartitionTakenOverError
from airflow_provider_eh.ingest import BatchProcessor, IngestEvent, SqlIngestStore, Stream
from airflow_provider_eh.ingest.sinks.sql.dialects import pymysql_values


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


# Text the bulk paths must carry unchanged: quotes, the escapes of CSV, of COPY and of MySQL string
# literals, parameter markers, words that read as NULL or booleans, and characters beyond ASCII.
NASTY_TEXT = [
    "", " ", "'", "''", '"', '""', "\\", "\\\\", "\\N", "\\n", "NULL", "null", "None", "true", "f", "%s", "%%", "%(x)s",
    "?", "a,b", "a;b", "tab\there", "line\nbreak", "cr\rlf\r\n", "\x1a", "\x7f", "end\\", "x'); DROP TABLE rows_t; --",
    "é", "日本語", "🎉 emoji", "\u2028", '{"json": ["a", 1, null]}', " lead and trail ",
]


def _nasty_rows(db) -> list[dict]:
    mysql = isinstance(db, dict) and "mysql" in db
    texts = NASTY_TEXT + (["nul\x00inside"] if not (isinstance(db, dict) and "postgres" in db) else [])
    numbers = [0, -1, 2**62, -(2**62), 7, None]
    reals = [0.1, -2.5e-300, 1e300, 3.0, None, 1 / 3]
    return [
        {"id": i, "txt": text, "num": numbers[i % len(numbers)], "real_v": reals[i % len(reals)],
         "note": None if i % 5 == 0 else text[::-1], "big": "x" * (1 + i * 97 % 300) + ("\\" if mysql else "")}
        for i, text in enumerate(texts)
    ]


def test_a_batch_of_nasty_values_is_stored_as_the_driver_binds_them(db):
    """The bulk path of each database (COPY, the package's multi-row VALUES, SQLite's multi-row INSERT)
    stores exactly what the driver's own parameter binding stores, one row at a time."""
    columns = "(id INTEGER NOT NULL, txt TEXT, num BIGINT, real_v DOUBLE PRECISION, note TEXT, big TEXT)"
    if isinstance(db, dict) and "mysql" in db:
        columns += " CHARACTER SET utf8mb4"  # the test server's default is latin1
    sinks.execute(db, "DROP TABLE IF EXISTS bound_t", f"CREATE TABLE rows_t {columns}", f"CREATE TABLE bound_t {columns}")
    rows = _nasty_rows(db)
    conn = sinks.connect(db)
    store = SqlIngestStore(conn, Stream("ns", "hub", "$Default"))
    with store.transaction() as tx:
        tx.insert_rows("rows_t", rows, alone=True)
    marker = "?" if isinstance(db, str) else "%s"
    cur = conn.cursor()
    for row in rows:
        cur.execute(f"INSERT INTO bound_t (id, txt, num, real_v, note, big) VALUES ({', '.join([marker] * 6)})",
                    tuple(row.values()))
    conn.commit()
    store.close()
    bulk = sinks.query(db, "SELECT id, txt, num, real_v, note, big FROM rows_t ORDER BY id")
    bound = sinks.query(db, "SELECT id, txt, num, real_v, note, big FROM bound_t ORDER BY id")
    assert bulk == bound
    assert [r[1] for r in bulk] == [row["txt"] for row in rows]  # and what was sent, character for character


def test_the_package_writes_mysql_values_as_pymysql_does(mariadb):
    """:func:`pymysql_values` against PyMySQL's own ``mogrify``, value types PyMySQL knows included."""
    import pymysql

    conn = pymysql.connect(**mariadb)
    cur = conn.cursor()
    rows = [tuple(row.values()) for row in _nasty_rows({"mysql": mariadb})]
    others = [(True, b"\x00\xff'\\", datetime(2026, 1, 2, 3, 4, 5, 6), datetime(2026, 1, 2), Decimal("-1.50"), 2.5),
              (False, b"", datetime(1999, 12, 31, 23, 59, 59), None, Decimal("0"), None)]
    for sample in (rows, others, [(None, None), ("a", 1)], [("only text",)]):
        width = len(sample[0])
        assert pymysql_values(conn, sample) == [cur.mogrify("(" + ",".join(["%s"] * width) + ")", row) for row in sample]
    conn.close()


def test_a_refused_row_is_dead_lettered_alone_by_name_and_the_batch_commits(db):
    """A row the database refuses fails the bulk write; the batch is then written event by event and
    the refused event is dead-lettered, naming the table and the database's reason."""
    sinks.execute(db, "CREATE TABLE rows_t (id INTEGER NOT NULL, label VARCHAR(8) NOT NULL)")
    store = SqlIngestStore(sinks.connect(db), Stream("ns", "hub", "$Default"))
    processor = BatchProcessor("rows_t", lambda e: {"id": e.sequence_number, "label": e.json()["label"]})
    events = [
        IngestEvent("0", seq, str(seq), None, json.dumps({"label": label}).encode(), {"eh.group": "g", "eh.seq": seq})
        for seq, label in enumerate(["a", "b", None, "d", "e"])  # NULL into NOT NULL: refused everywhere
    ]
    with store.transaction() as tx:
        result = processor.process(tx, "0", events)
        tx.advance_checkpoint("0", -1, 4, "4", "me")
    assert (result.rows, result.dead_letters, result.applied) == (4, 1, 4)
    [letter] = store.dead_letters()
    assert (letter.event.partition_id, letter.event.sequence_number, letter.reason) == ("0", 2, "row_rejected")
    assert "table 'rows_t' refused the rows" in letter.error and "label" in letter.error.lower()
    assert store.checkpoints(["0"])["0"].sequence_number == 4
    store.close()
    assert sorted(r[0] for r in sinks.query(db, "SELECT id FROM rows_t")) == [0, 1, 3, 4]
    assert sinks.query(db, "SELECT producer_group, high_water_mark FROM eh_ingest_dedupe") == [("g", 4)]


@pytest.mark.parametrize("server", ["postgres", "mariadb"])
def test_a_batch_goes_to_the_server_in_few_calls(server, request):
    """Each call that waits on the server costs the batch a hand-over of the interpreter lock: Postgres
    gets the savepoint with the COPY and the release and marks with the checkpoint (3 calls), MariaDB
    a refused row undone by the server itself instead of a savepoint (4 calls)."""
    calls: list[str] = []
    if server == "postgres":
        import psycopg2
        import psycopg2.extensions

        class Counting(psycopg2.extensions.cursor):
            def execute(self, query, vars=None):
                calls.append(query if isinstance(query, str) else query.decode())
                return super().execute(query, vars)

            def copy_expert(self, sql, file, size=8192):
                calls.append(sql if isinstance(sql, str) else sql.decode())
                return super().copy_expert(sql, file, size)

        db = {"postgres": request.getfixturevalue("postgres")}
        conn = psycopg2.connect(db["postgres"], cursor_factory=Counting)
    else:
        import pymysql
        import pymysql.cursors

        class Counting(pymysql.cursors.Cursor):  # type: ignore[no-redef]
            def execute(self, query, args=None):
                calls.append(query)
                return super().execute(query, args)

        db = {"mysql": request.getfixturevalue("mariadb")}
        conn = pymysql.connect(**db["mysql"], cursorclass=Counting)
    sinks.execute(db, "DROP TABLE IF EXISTS rows_t", *(f"DROP TABLE IF EXISTS eh_ingest_{t}" for t in STATE_TABLES),
                  "CREATE TABLE rows_t (id INTEGER NOT NULL, note TEXT)")
    store = SqlIngestStore(conn, Stream("ns", "hub", "$Default"))
    processor = BatchProcessor("rows_t")
    for first in (0, 100):
        events = [IngestEvent("0", seq, str(seq), None, json.dumps({"id": seq, "note": "n"}).encode(),
                              {"eh.group": "g", "eh.seq": seq}) for seq in range(first, first + 100)]
        calls.clear()
        with store.transaction() as tx:
            processor.process(tx, "0", events)
            tx.advance_checkpoint("0", first - 1, first + 99, str(first + 99), "me")
    assert len(calls) == (3 if server == "postgres" else 4), calls
    store.close()
    assert sinks.query(db, "SELECT count(*), count(DISTINCT id) FROM rows_t") == [(200, 200)]
    assert sinks.query(db, "SELECT producer_group, high_water_mark FROM eh_ingest_dedupe") == [("g", 199)]
    assert sinks.query(db, "SELECT sequence_number FROM eh_ingest_checkpoint") == [(199,)]
