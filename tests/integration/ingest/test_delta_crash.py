"""Delta sink: worker processes SIGKILLed at each step of a batch, one after another, then a clean run, on a
table on local disk and on one in Azurite: every event is in the table exactly once (read back with
``deltalake`` and, file by file, with PyArrow), each partition's application transaction is its last
sequence number, and the table's history holds one commit per batch that reached ``committed``.

As in ``test_crash_recovery.py``: one hub and one sequence of processes per table, a worker killed at
``received`` of its 2nd batch, the next at ``rows_written`` (the batch's rows buffered, not committed), then at
``committed``, then at ``blob_checkpointed``, then a worker that runs to the end; each resumes from the table's log.
The dead letters' replay is killed after each of its commits and run again, on both tables as well.
"""

from __future__ import annotations

import json
import signal
from collections import Counter

import pyarrow.dataset as ds
import pytest
from azure.storage.blob import BlobServiceClient
from conftest import blob_checkpoints, publish, stamped, trace
from deltalake import DeltaTable

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.ingest import STAGES, Stream
from airflow_provider_eh.ingest.delta_replay import replay_app_id
from airflow_provider_eh.ingest.sinks.delta import DeltaIngestStore, DeltaTarget

PER_PARTITION = 25


@pytest.fixture(params=["local", "azurite"])
def delta_table(request, tmp_path, monkeypatch):
    """``{uri, storage_options}`` of a table yet to be created: on local disk, or in an Azurite container whose
    options come from a ``wasb`` connection as the operator builds them."""
    if request.param == "local":
        return {"uri": str(tmp_path / "lake" / "events"), "storage_options": None}
    from airflow_provider_eh.hooks.blob import BlobStorageHook
    from tests.conftest import connection_env, unique_name

    azurite = request.getfixturevalue("azurite")
    name = unique_name("lake")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(name)
    monkeypatch.setenv(*connection_env("wasb_delta", "wasb", extra={"connection_string": azurite.connection_string}))
    return {"uri": f"abfss://{name}@devstoreaccount1.dfs.core.windows.net/events",
            "storage_options": BlobStorageHook("wasb_delta").delta_storage_options()}


def read_rows(table: dict) -> list[tuple[str, str, int]]:
    """The table's rows through ``deltalake``, checked against its data files read with PyArrow alone."""
    delta = DeltaTable(table["uri"], storage_options=table["storage_options"])
    rows = sorted((r["id"], r["partition_id"], r["sequence_number"]) for r in delta.to_pyarrow_table().to_pylist())
    files = delta.file_uris()
    if table["storage_options"] is not None:  # the store handler reads paths relative to the table
        files = [f.removeprefix(table["uri"] + "/") for f in files]
    dataset = ds.dataset(files, format="parquet", filesystem=_filesystem(table))
    assert sorted(zip(*(dataset.to_table().column(c).to_pylist() for c in ("id", "partition_id", "sequence_number")),
                      strict=True)) == rows
    return rows


def _filesystem(table: dict):
    if table["storage_options"] is None:
        return None
    from deltalake.fs import DeltaStorageHandler
    from pyarrow.fs import PyFileSystem

    return PyFileSystem(DeltaStorageHandler(table["uri"], table["storage_options"]))


def test_delta_kill_at_every_step_then_resume_writes_each_event_once(
    delta_table, forked_worker, eh_conn_str, azurite, container, tmp_path
):
    publish(eh_conn_str, {p: stamped(p, PER_PARTITION) for p in "0123"})
    total = 4 * PER_PARTITION
    commits = 0
    limits = {"batch_size": 10, "max_wait_time": 0.3, "max_duration": 90, "ownership_expiry": 6, "poll_interval": 0.5,
              "batch_seconds": 0.2}
    for stage in STAGES:
        slow = {"pause": 0.2, "pause_at": ["committed"]} if stage == "blob_checkpointed" else {}
        code, output = forked_worker(delta=delta_table, limits=limits, crash={"stage": stage, "batch": 2}, **slow)
        assert code == -signal.SIGKILL, (stage, output[-2000:])
        steps = trace(tmp_path)
        assert [t for t in steps if t["stage"] == stage and t["batch"] >= 2], f"no {stage} of a 2nd batch in the trace"
        commits += sum(t["stage"] == "committed" for t in steps)
        rows = read_rows(delta_table)
        assert 0 < len(rows) < total, f"the worker killed at {stage} had written {len(rows)} of {total} events"
        assert max(Counter(r[0] for r in rows).values()) == 1, f"an event written twice after a kill at {stage}"
        (tmp_path / "trace.jsonl").unlink()

    code, output = forked_worker(delta=delta_table, limits=limits)
    assert code == 0, output[-2000:]
    commits += sum(t["stage"] == "committed" for t in trace(tmp_path))

    rows = read_rows(delta_table)
    counts = Counter(r[0] for r in rows)
    assert set(counts) == {f"p{p}-{i}" for p in "0123" for i in range(PER_PARTITION)}
    assert max(counts.values()) == 1
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)
    store = DeltaIngestStore(DeltaTarget(delta_table["uri"], delta_table["storage_options"]),
                             Stream(endpoint.namespace, endpoint.eventhub_name, "$Default"))
    assert {p: c.sequence_number for p, c in store.checkpoints("0123").items()} == {p: PER_PARTITION - 1 for p in "0123"}
    history = DeltaTable(delta_table["uri"], storage_options=delta_table["storage_options"]).history()
    # one commit per batch: each holds one batch's rows at most, and together they hold each event once (a batch
    # committed twice would add its rows twice). A kill can land between another partition's commit and the
    # line its thread traces for it, so the trace counts a floor of the commits, not all of them.
    assert {h["operation"] for h in history} == {"WRITE"} and len(history) >= commits
    assert all(0 < h["operationMetrics"]["num_added_rows"] <= limits["batch_size"] for h in history)
    assert sum(h["operationMetrics"]["num_added_rows"] for h in history) == total
    # the standard blob checkpoints follow the table's, with the offsets its commits recorded
    assert blob_checkpoints(azurite, container, eh_conn_str) == {p: PER_PARTITION - 1 for p in "0123"}


def test_delta_replay_killed_after_each_commit_then_rerun_writes_each_dead_letter_once(
    delta_table, forked_worker, eh_conn_str, tmp_path
):
    """A replay is three commits (intent in the dead-letter table, rows with the replay's application
    transaction, done); SIGKILLed after the first, then after the second, then run to the end: each dead
    letter's row is in the table once, read back with ``deltalake`` and PyArrow, and the letters are ``replayed``."""
    events = {p: stamped(p, 8) for p in "01"}
    poisoned = {("0", 2), ("0", 5), ("1", 0), ("1", 7)}
    for p, seq in poisoned:
        events[p][seq]["body"]["poison"] = True
    publish(eh_conn_str, events)
    code, output = forked_worker(delta=delta_table, limits={"max_wait_time": 0.3, "max_duration": 60, "batch_seconds": 0.2})
    assert code == 0, output[-2000:]
    assert len(read_rows(delta_table)) == 16 - len(poisoned)
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)
    store = DeltaIngestStore(DeltaTarget(delta_table["uri"], delta_table["storage_options"]),
                             Stream(endpoint.namespace, endpoint.eventhub_name, "$Default"))
    assert {(d["partition_id"], d["sequence_number"]) for d in store.dead_letters()} == poisoned

    for point, status, landed in (("replay_intent", "replaying", 0), ("replay_committed", "replaying", 4)):
        code, output = forked_worker(delta=delta_table, replay=True, crash={"point": point})
        assert code == -signal.SIGKILL, (point, output[-2000:])
        rows = read_rows(delta_table)
        assert len(rows) == 12 + landed and max(Counter(r[0] for r in rows).values()) == 1, point
        assert {d["status"] for d in store.dead_letters()} == {status}, point

    code, output = forked_worker(delta=delta_table, replay=True)
    assert code == 0, output[-2000:]
    assert sorted(tuple(x) for x in json.loads(output.strip().splitlines()[-1])["replayed"]) == sorted(poisoned)
    code, output = forked_worker(delta=delta_table, replay=True)  # nothing left to replay
    assert code == 0 and json.loads(output.strip().splitlines()[-1]) == {"replayed": [], "failed": []}
    counts = Counter(r[0] for r in read_rows(delta_table))
    assert set(counts) == {f"p{p}-{i}" for p in "01" for i in range(8)} and max(counts.values()) == 1
    assert {d["status"] for d in store.dead_letters()} == {"replayed"}
    table = DeltaTable(delta_table["uri"], storage_options=delta_table["storage_options"])
    # the first replay's intent (version 0) never reached the table; the second's rows (version 1) did, once
    assert table.transaction_version(replay_app_id(store)) == 1
