"""Dedupe, dead letters and in-order sessions through the real SDK, the local endpoint and SQLite."""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient
from conftest import ingest, publish, stamped, table_rows

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import IngestStalledError
from airflow_provider_eh.ingest import IngestRun, SessionConfig
from airflow_provider_eh.ingest.runner import IngestedBatch


def test_events_republished_with_the_same_stamps_are_skipped_as_duplicates(eh_conn_str, sink_db):
    publish(eh_conn_str, {"0": stamped("0", 10), "1": stamped("1", 5)})
    ingest(eh_conn_str, sink_db)
    # a publisher retry re-sends seq 5..9 of partition 0 and then goes on with 10..14
    publish(eh_conn_str, {"0": stamped("0", 5, start=5) + stamped("0", 5, start=10)})
    summary = ingest(eh_conn_str, sink_db)
    assert summary["partitions"]["0"]["duplicates"] == 5
    ids = [r[0] for r in table_rows(sink_db)]
    assert sorted(ids) == sorted({f"p0-{i}" for i in range(15)} | {f"p1-{i}" for i in range(5)})


def test_poison_event_lands_in_dead_letters_and_the_run_succeeds_then_replays_once_fixed(eh_conn_str, sink_db):
    events = stamped("2", 6)
    events[3]["body"]["poison"] = True
    publish(eh_conn_str, {"2": events})
    summary = ingest(eh_conn_str, sink_db)
    assert summary["partitions"]["2"]["dead_letters"] == 1
    assert [r[2] for r in table_rows(sink_db)] == [0, 1, 2, 4, 5]
    with sqlite3.connect(sink_db) as conn:
        (letter,) = conn.execute(
            "SELECT partition_id, sequence_number, event_offset, error, failed_at, status FROM eh_ingest_dead_letter"
        ).fetchall()
    assert letter[:2] == ("2", 3) and letter[2] is not None and "poison event p2-3" in letter[3] and letter[5] == "dead"

    # the cause is fixed: a row function that accepts it; replay through the CLI, twice (the second is a no-op)
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)
    cli = [
        sys.executable, "-m", "airflow_provider_eh.ingest", "--sqlite", str(sink_db),
        "--namespace", endpoint.namespace, "--eventhub", endpoint.eventhub_name, "--table", "events",
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    listed = subprocess.run([*cli, "list"], capture_output=True, text=True, check=True, env=env)
    assert json.loads(listed.stdout)[0]["sequence_number"] == 3
    still_broken = subprocess.run([*cli, "--row-function", "worker:rows", "replay"], capture_output=True, text=True, env=env)
    assert json.loads(still_broken.stdout)["failed"][0][:2] == ["2", 3]
    for expected in ([["2", 3]], []):
        out = subprocess.run(
            [*cli, "--row-function", "worker:accept_all", "replay", "--partition", "2"],
            capture_output=True, text=True, check=True, env=env,
        )
        assert json.loads(out.stdout)["replayed"] == expected
    assert sorted(r[0] for r in table_rows(sink_db)).count("p2-3") == 1


def test_session_events_published_out_of_order_are_applied_in_session_order(eh_conn_str, sink_db):
    def step(session, n, partition):
        return {"body": {"id": f"{session}-{n}", "session": session, "step": n}}

    # two sessions interleaved over two partitions, each arriving out of order
    publish(eh_conn_str, {
        "0": [step("a", 2, "0"), step("b", 1, "0"), step("a", 0, "0")],
        "1": [step("b", 0, "1"), step("a", 1, "1"), step("b", 2, "1")],
    })
    sessions = SessionConfig.of("body:session", "body:step")
    ingest(eh_conn_str, sink_db, sessions=sessions, partition_ids=["0"])
    assert [r[0] for r in _in_insert_order(sink_db)] == ["a-0"]
    ingest(eh_conn_str, sink_db, sessions=sessions)
    applied = [r[0] for r in _in_insert_order(sink_db)]
    for session in "ab":
        assert [i for i in applied if i.startswith(session)] == [f"{session}-0", f"{session}-1", f"{session}-2"]
    with sqlite3.connect(sink_db) as conn:
        assert conn.execute("SELECT count(*) FROM eh_ingest_deferred").fetchone()[0] == 0


def _in_insert_order(db):
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id FROM events ORDER BY rowid").fetchall()


def test_without_a_blob_container_a_single_instance_keeps_sql_checkpoints_only(eh_conn_str, sink_db, azurite, container):
    publish(eh_conn_str, {"3": stamped("3", 4)})
    ingest(eh_conn_str, sink_db)
    client = ContainerClient.from_connection_string(azurite.connection_string, container)
    assert list(client.list_blobs()) == []
    assert [r[2] for r in table_rows(sink_db)] == [0, 1, 2, 3]


def test_partition_that_stops_delivering_before_its_target_fails_the_run_instead_of_hanging(eh_conn_str, sink_db, monkeypatch):
    publish(eh_conn_str, {"1": stamped("1", 3)})
    # the hub said seq 5 was enqueued, but only 0..2 can be read (as after a retention cut or a lost hub)
    monkeypatch.setattr(IngestRun, "_targets", lambda self, client: ({"1": 5}, {"1": 5}))
    with pytest.raises(IngestStalledError, match="Partition '1'.*no event after seq 2"):
        ingest(eh_conn_str, sink_db, stall_timeout=1.5)
    assert [r[2] for r in table_rows(sink_db)] == [0, 1, 2]


def test_each_partitions_lag_after_its_batches_counts_what_the_hub_holds_now(eh_conn_str, sink_db, caplog):
    """The hub's end is read again every ``lag_interval``: events enqueued after the run's start (beyond its
    bounds) count in the lag of the batches committed after they were."""
    publish(eh_conn_str, {"0": stamped("0", 120), "1": stamped("1", 30)})
    caplog.set_level("INFO", logger="airflow_provider_eh.ingest.runner")
    committed: list[IngestedBatch] = []  # what the operator's metrics are emitted from, batch by batch
    frozen: list[int] = []  # how many objects the collector's full passes left out while each batch committed

    def on_batch(batch: IngestedBatch) -> None:
        committed.append(batch)
        frozen.append(gc.get_freeze_count())
        if len(committed) == 1:  # a producer goes on while the run reads: 50 more on partition 0
            publish(eh_conn_str, {"0": stamped("0", 50, start=120)})
            time.sleep(1.0)  # several of the run's lag intervals

    summary = ingest(eh_conn_str, sink_db, max_events=100, on_batch=on_batch, lag_interval=0.2)  # stops short
    reports = summary["partitions"]
    stopped_at = {p: r["checkpoint"] for p, r in reports.items()}
    assert sum(r["rows"] for r in reports.values()) == 100
    assert stopped_at["0"] <= 119  # the run's bound: the hub's end when it started
    assert reports["0"]["last_enqueued"] == 169 and reports["0"]["lag"] == 169 - stopped_at["0"] > 50
    assert sum(b.counts.rows for b in committed) == 100 and len(committed) == sum(r["batches"] for r in reports.values())
    assert [b.lag for b in committed if b.partition_id == "0"][-1] == reports["0"]["lag"]
    assert all(b.enqueued_time is not None and b.seconds >= 0 for b in committed)
    if "1" in reports and reports["1"]["batches"]:
        assert reports["1"]["last_enqueued"] == 29 and reports["1"]["lag"] == 29 - stopped_at["1"]
    assert f"lag {169 - stopped_at['0']} (last enqueued 169)" in caplog.text
    # the process's older objects are out of the full collections' way during the run, back in after it (garbage_collection.py)
    assert min(frozen) > 1000 and gc.get_freeze_count() == 0
    # the first batch's lag was counted from the ends the run read for its bounds, before the 50 were added
    assert committed[0].lag is not None and committed[0].lag < {"0": 120, "1": 30}[committed[0].partition_id]

    rest = ingest(eh_conn_str, sink_db)  # to the end, the 50 added included: nothing left behind
    assert all(r["lag"] == 0 for r in rest["partitions"].values() if r["batches"])
    assert rest["partitions"]["0"]["checkpoint"] == 169
