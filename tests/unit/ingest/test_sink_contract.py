"""Both sinks against the declared contract (``ingest/sinks/contract.py``): what each transaction is, what the
engine refuses on a sink without sessions, and data errors told apart by type."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

import pytest

from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest import BatchProcessor, IngestEvent, SessionConfig, SqlIngestStore
from airflow_provider_eh.ingest.delta_replay import _ReplayTransaction
from airflow_provider_eh.ingest.runner import IngestRun
from airflow_provider_eh.ingest.sinks import BatchTransaction, ReplayTransaction, SessionTransaction, Stream
from airflow_provider_eh.ingest.sinks.delta import DataError, DeltaIngestStore, DeltaTarget, DeltaTransaction

STREAM = Stream("ns.example.net", "orders", "$Default")


def event(seq: int, body: dict, **properties) -> IngestEvent:
    return IngestEvent("0", seq, str(seq), datetime(2026, 1, 1, tzinfo=UTC), json.dumps(body).encode(), properties)


@pytest.fixture
def sql_store():
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER NOT NULL)")
    store = SqlIngestStore(conn, STREAM)
    yield store
    store.close()


def test_the_sql_transaction_keeps_sessions_and_replays_the_delta_one_neither(sql_store, tmp_path):
    delta = DeltaIngestStore(DeltaTarget(str(tmp_path / "orders")), STREAM)
    assert (sql_store.keeps_sessions, delta.keeps_sessions) == (True, False)
    with sql_store.transaction() as tx:
        assert isinstance(tx, SessionTransaction) and isinstance(tx, ReplayTransaction)
    dtx = DeltaTransaction(delta)  # what delta.transaction() yields, not committed here
    assert isinstance(dtx, BatchTransaction)
    assert not isinstance(dtx, SessionTransaction) and not isinstance(dtx, ReplayTransaction)
    assert isinstance(_ReplayTransaction(delta), ReplayTransaction)  # the Delta replay's own


def test_sessions_on_a_sink_that_keeps_none_are_refused_before_a_link_opens(tmp_path):
    delta = DeltaIngestStore(DeltaTarget(str(tmp_path / "orders")), STREAM)
    in_order = BatchProcessor("orders", sessions=SessionConfig.of("property:session"))
    with pytest.raises(SinkConfigError, match="session_key: .*DeltaIngestStore does not keep them"):
        IngestRun(object(), "$Default", delta, in_order, owner_id="me").run()  # type: ignore[arg-type]
    # and a transaction handed straight to the processor is refused before anything is buffered
    tx = DeltaTransaction(delta)
    with pytest.raises(SinkConfigError, match="DeltaTransaction does not keep them"):
        in_order.process(tx, "0", [event(0, {"id": 1}, session="s")])
    assert tx.rows == [] and tx.dead_letters == []


def test_a_replay_through_a_transaction_that_cannot_mark_one_is_refused(tmp_path):
    delta = DeltaIngestStore(DeltaTarget(str(tmp_path / "orders")), STREAM)
    with pytest.raises(SinkConfigError, match="cannot mark a dead letter replayed"):
        BatchProcessor("orders").replay(DeltaTransaction(delta), event(0, {"id": 1}))


def test_data_errors_are_the_drivers_classes_not_their_names(sql_store, tmp_path):
    class IntegrityError(Exception):
        """User code's error that merely shares a driver error's name."""

    with sql_store.transaction() as tx:
        assert tx.is_data_error(sqlite3.IntegrityError("UNIQUE constraint failed"))
        assert not tx.is_data_error(IntegrityError("not the driver's"))
        assert not tx.is_data_error(sqlite3.OperationalError("no such table"))
    dtx = DeltaTransaction(DeltaIngestStore(DeltaTarget(str(tmp_path / "orders")), STREAM))
    assert dtx.is_data_error(DataError("a value does not fit"))
    assert not dtx.is_data_error(ValueError("user code"))


def test_a_refused_row_is_dead_lettered_alone_and_user_errors_named_like_driver_ones_are_not_data_errors(sql_store):
    processor = BatchProcessor("orders", lambda e: e.json())
    with sql_store.transaction() as tx:
        result = processor.process(tx, "0", [event(0, {"id": 1, "amount": 5}), event(1, {"id": 2, "amount": None}),
                                             event(2, {"id": 3, "amount": 7})])
        tx.advance_checkpoint("0", -1, 2, "2", "me")
    assert (result.rows, result.dead_letters) == (2, 1)
    letters = sql_store.dead_letters()
    assert [(d.event.sequence_number, d.reason) for d in letters] == [(1, "row_rejected")]
    assert "IntegrityError" in letters[0].error
