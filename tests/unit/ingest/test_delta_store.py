"""The Delta store on a real Delta table on local disk (delta-rs): a batch's rows and its partition's
checkpoint in one commit, dedupe marks and dead letters and their replay, merge on keys, the race of two
writers of one partition, and the options it refuses."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from airflow_provider_eh.errors import DeadLetterNotFoundError, PartitionTakenOverError, ReplayRaceError, SinkConfigError
from airflow_provider_eh.ingest import BatchProcessor, IngestEvent, SessionConfig, Stream, delta_replay, replay_dead_letters
from airflow_provider_eh.ingest.__main__ import main
from airflow_provider_eh.ingest.delta_replay import replay_app_id
from airflow_provider_eh.ingest.sinks.delta import DeltaIngestStore, DeltaTarget, check_delta_options, maintain
from airflow_provider_eh.steps import observe

STREAM = Stream("ns.example.net", "orders", "$Default")


def event(partition: str, seq: int, body: dict, **properties) -> IngestEvent:
    return IngestEvent(partition, seq, str(seq * 100), datetime(2026, 1, 1, tzinfo=UTC), json.dumps(body).encode(),
                       properties)


def rows(e: IngestEvent) -> dict:
    body = e.json()
    if body.get("poison"):
        raise ValueError(f"poison {body['id']}")
    return {"id": body["id"], "partition_id": e.partition_id, "sequence_number": e.sequence_number,
            "amount": body.get("amount", 0)}


def commit(store: DeltaIngestStore, partition: str, events: list[IngestEvent], *, dedupe: bool = True, after=None):
    processor = BatchProcessor("delta_table", rows, dedupe=dedupe)
    if after is None:
        after = store.checkpoints([partition])[partition].sequence_number
    with store.transaction() as tx:
        counts = processor.process(tx, partition, events)
        tx.advance_checkpoint(partition, after, events[-1].sequence_number, events[-1].offset, "me")
    return counts


def table_ids(uri: str) -> list[str]:
    return sorted(r["id"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist())


def test_batch_rows_and_checkpoint_land_in_one_commit_and_resume_from_the_log(tmp_path):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri), STREAM)
    assert store.checkpoints(["0"])["0"].sequence_number == -1
    commit(store, "0", [event("0", i, {"id": f"a{i}"}) for i in range(3)])
    commit(store, "0", [event("0", i, {"id": f"a{i}"}) for i in range(3, 5)])
    commit(store, "1", [event("1", 0, {"id": "b0"})])

    reopened = DeltaIngestStore(DeltaTarget(uri), STREAM)
    checkpoints = reopened.checkpoints(["0", "1", "2"])
    assert {p: c.sequence_number for p, c in checkpoints.items()} == {"0": 4, "1": 0, "2": -1}
    assert checkpoints["0"].offset == "400"  # from the commit's metadata, not this process
    table = DeltaTable(uri)
    assert table.version() == 2  # one commit per batch
    assert table.transaction_version(store.app_id("0")) == 4
    assert [h["operation"] for h in table.history()] == ["WRITE"] * 3
    assert sorted(ds.dataset(table.file_uris(), format="parquet").to_table().column("id").to_pylist()) == table_ids(uri)
    assert table_ids(uri) == ["a0", "a1", "a2", "a3", "a4", "b0"]


def test_a_writer_behind_the_log_loses_its_commit_and_the_partition(tmp_path):
    uri = str(tmp_path / "orders")
    first = DeltaIngestStore(DeltaTarget(uri), STREAM)
    commit(first, "0", [event("0", 0, {"id": "a0"})])
    second = DeltaIngestStore(DeltaTarget(uri), STREAM)
    processor = BatchProcessor("delta_table", rows)
    # both read checkpoint 0; the first commits 1-2 while the second's batch of the same range is being written
    with pytest.raises(PartitionTakenOverError, match="another instance"):
        with second.transaction() as tx:
            processor.process(tx, "0", [event("0", 1, {"id": "x1"}), event("0", 2, {"id": "x2"})])
            tx.advance_checkpoint("0", 0, 2, "200", "second")
            commit(first, "0", [event("0", 1, {"id": "a1"}), event("0", 2, {"id": "a2"})], after=0)
    assert table_ids(uri) == ["a0", "a1", "a2"]
    assert second.counts.taken_over == 1
    # a writer that read an old checkpoint is refused before writing anything
    with pytest.raises(PartitionTakenOverError, match="checkpointed at sequence number 2, not 0"):
        commit(second, "0", [event("0", 1, {"id": "y1"})], after=0)
    # another partition of the same table is written meanwhile without conflict
    commit(second, "1", [event("1", 0, {"id": "b0"})])
    assert table_ids(uri) == ["a0", "a1", "a2", "b0"]


def test_dedupe_marks_and_dead_letters_are_kept_once(tmp_path):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri), STREAM)
    stamp = {"eh.group": "pub"}
    batch = [event("0", 0, {"id": "a0"}, **stamp, **{"eh.seq": 0}), event("0", 1, {"id": "p1", "poison": True}),
             event("0", 2, {"id": "a0"}, **stamp, **{"eh.seq": 0})]  # a re-sent duplicate
    counts = commit(store, "0", batch)
    assert (counts.rows, counts.duplicates, counts.dead_letters) == (1, 1, 1)
    assert DeltaTable(uri).transaction_version(store.dedupe_app_id("0", "pub")) == 0
    # the same stamp in a later batch is a duplicate too: the mark is in the log
    assert commit(store, "0", [event("0", 3, {"id": "a0"}, **stamp, **{"eh.seq": 0})]).duplicates == 1
    letters = store.dead_letters()
    assert [(d["sequence_number"], d["reason"]) for d in letters] == [(1, "rejected")]
    assert "poison p1" in letters[0]["error"]
    assert table_ids(uri) == ["a0"]
    # a batch received again after a crash between the dead-letter commit and the table's writes them once
    dead = DeltaIngestStore(DeltaTarget(str(tmp_path / "other")), STREAM)
    dead._commit_dead_letters("0", 1, letters[:1])
    dead._commit_dead_letters("0", 1, letters[:1])
    assert len(dead.dead_letters()) == 1


def test_rows_the_table_cannot_hold_are_dead_lettered_alone(tmp_path):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri), STREAM)
    commit(store, "0", [event("0", 0, {"id": "a0", "amount": 1})])
    counts = commit(store, "0", [event("0", 1, {"id": "a1", "amount": 2}), event("0", 2, {"id": "a2", "amount": "many"})])
    assert (counts.rows, counts.dead_letters) == (1, 1)
    assert [d["reason"] for d in store.dead_letters()] == ["row_rejected"]
    assert table_ids(uri) == ["a0", "a1"]


def test_merge_updates_rows_by_key_with_the_checkpoint(tmp_path):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri, mode="merge", merge_keys=["id"]), STREAM)
    commit(store, "0", [event("0", 0, {"id": "a", "amount": 1}), event("0", 1, {"id": "b", "amount": 1})])
    commit(store, "0", [event("0", 2, {"id": "a", "amount": 2}), event("0", 3, {"id": "a", "amount": 3}),
                        event("0", 4, {"id": "c", "amount": 1})])
    table = DeltaTable(uri)
    assert {r["id"]: r["amount"] for r in table.to_pyarrow_table().to_pylist()} == {"a": 3, "b": 1, "c": 1}
    assert table.history(1)[0]["operation"] == "MERGE"
    assert table.transaction_version(store.app_id("0")) == 4


def test_partition_columns_and_maintenance(tmp_path):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri, partition_by=["partition_id"]), STREAM)
    for i in range(4):
        commit(store, "0", [event("0", i, {"id": f"a{i}"})], dedupe=False)
    table = DeltaTable(uri)
    assert table.metadata().partition_columns == ["partition_id"]
    assert len(table.file_uris()) == 4
    result = maintain(uri, vacuum_hours=0)
    table = DeltaTable(uri)
    assert len(table.file_uris()) == 1 and result["vacuumed_files"] == 4
    assert table.transaction_version(store.app_id("0")) == 3  # compaction keeps the checkpoint
    with pytest.raises(SinkConfigError, match=r"partition_by \['id'\] does not match"):
        DeltaIngestStore(DeltaTarget(uri, partition_by=["id"]), STREAM)


def test_what_the_delta_sink_refuses():
    with pytest.raises(SinkConfigError, match="session_key"):
        check_delta_options(sessions=SessionConfig.of("property:s"), mode="append", merge_keys=None)
    with pytest.raises(SinkConfigError, match="merge_keys"):
        check_delta_options(sessions=None, mode="merge", merge_keys=None)
    with pytest.raises(SinkConfigError, match="delta_mode"):
        check_delta_options(sessions=None, mode="upsert", merge_keys=["id"])
    with pytest.raises(SinkConfigError, match="dead_letter_table"):
        DeltaTarget("/x/t", dead_letter_uri="/x/t/")
    assert "key" not in repr(DeltaTarget("az://c/t", {"azure_storage_account_key": "secret"}))


def accept(e: IngestEvent) -> dict:
    body = e.json()
    return {"id": body["id"], "partition_id": e.partition_id, "sequence_number": e.sequence_number,
            "amount": body.get("amount", 0)}


def test_dead_letters_replay_once_into_the_table_and_a_failed_one_stays_dead(tmp_path):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri), STREAM)
    commit(store, "0", [event("0", 0, {"id": "a0"}), event("0", 1, {"id": "p1", "poison": True}),
                        event("0", 2, {"id": "p2", "poison": True})])
    commit(store, "1", [event("1", 0, {"id": "q0", "poison": True})])
    # still broken: every letter fails again, one attempt more, nothing written
    result = replay_dead_letters(store, BatchProcessor("delta_table", rows))
    assert [f[:2] for f in result["failed"]] == [["0", 1], ["0", 2], ["1", 0]] and result["replayed"] == []
    assert {d["attempts"] for d in store.dead_letters()} == {2} and table_ids(uri) == ["a0"]
    # fixed for partition 0 only, seq 2 refused by the table (a text amount): seq 1 lands, seq 2 stays dead
    def fixed(e: IngestEvent) -> dict:
        return {**accept(e), "amount": "many"} if e.sequence_number == 2 else accept(e)

    result = replay_dead_letters(store, BatchProcessor("delta_table", fixed), partition_id="0")
    assert result["replayed"] == [["0", 1]] and [f[:2] for f in result["failed"]] == [["0", 2]]
    assert table_ids(uri) == ["a0", "p1"]
    letters = {(d["partition_id"], d["sequence_number"]): d for d in store.dead_letters()}
    assert letters[("0", 1)]["status"] == "replayed" and letters[("0", 1)]["replayed_at"]
    assert letters[("0", 2)]["status"] == "dead" and letters[("0", 2)]["attempts"] == 3
    assert letters[("1", 0)]["status"] == "dead"
    # again with the fix for all: the replayed one is not applied twice; one commit of rows per replay
    result = replay_dead_letters(store, BatchProcessor("delta_table", accept))
    assert result["replayed"] == [["0", 2], ["1", 0]]
    assert replay_dead_letters(store, BatchProcessor("delta_table", accept)) == {"replayed": [], "failed": []}
    assert table_ids(uri) == ["a0", "p1", "p2", "q0"]
    assert DeltaTable(uri).transaction_version(replay_app_id(store)) == 1
    with pytest.raises(DeadLetterNotFoundError, match=r"sequence number\(s\) \[7\]"):
        replay_dead_letters(store, BatchProcessor("delta_table", accept), partition_id="0", sequence_numbers=[7])


def test_a_replay_interrupted_after_its_rows_commit_is_completed_without_writing_them_again(tmp_path):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri), STREAM)
    commit(store, "0", [event("0", 0, {"id": "a0"}), event("0", 1, {"id": "p1", "poison": True})])
    stop = observe(lambda step, count, detail: _interrupt(step, "replay_committed"))
    try:
        with pytest.raises(KeyboardInterrupt):
            replay_dead_letters(store, BatchProcessor("delta_table", accept))
    finally:
        stop()
    assert [d["status"] for d in store.dead_letters()] == ["replaying"] and table_ids(uri) == ["a0", "p1"]
    assert replay_dead_letters(store, BatchProcessor("delta_table", accept))["replayed"] == [["0", 1]]
    assert [d["status"] for d in store.dead_letters()] == ["replayed"] and table_ids(uri) == ["a0", "p1"]


def _interrupt(step: str, at: str) -> None:
    if step == at:
        raise KeyboardInterrupt(step)


def test_replay_creates_a_table_every_event_of_which_was_refused_and_merges_on_keys(tmp_path):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri, mode="merge", merge_keys=["id"]), STREAM)
    # a first batch whose every event is refused: its dead letters are committed, its checkpoint cannot be (there
    # is no table to hold it, and no row to create one from)
    with pytest.raises(SinkConfigError, match="no rows to take its columns from"), store.transaction() as tx:
        BatchProcessor("delta_table", rows).process(tx, "0", [event("0", 0, {"id": "a", "poison": True}),
                                                             event("0", 1, {"id": "a", "amount": 5, "poison": True})])
        tx.advance_checkpoint("0", -1, 1, "100", "me")
    store = DeltaIngestStore(DeltaTarget(uri, mode="merge", merge_keys=["id"]), STREAM)
    assert len(store.dead_letters()) == 2 and store.checkpoints(["0"])["0"].sequence_number == -1
    assert replay_dead_letters(store, BatchProcessor("delta_table", accept))["replayed"] == [["0", 0], ["0", 1]]
    table = DeltaTable(uri)
    assert {r["id"]: r["amount"] for r in table.to_pyarrow_table().to_pylist()} == {"a": 5}  # the later letter wins
    assert table.transaction_version(replay_app_id(store)) == 0


def test_of_two_replays_at_once_one_writes_the_rows_and_the_other_fails_writing_none(tmp_path):
    uri = str(tmp_path / "orders")
    commit(DeltaIngestStore(DeltaTarget(uri), STREAM), "0", [event("0", 0, {"id": "a0"}),
                                                             event("0", 1, {"id": "p1", "poison": True})])
    first, second = DeltaIngestStore(DeltaTarget(uri), STREAM), DeltaIngestStore(DeltaTarget(uri), STREAM)
    other: dict = {}

    def meanwhile(step: str, count: int, detail) -> None:  # the second replay runs whole between the first's commits
        if step == "replay_intent" and not other:
            other["started"] = True  # its own intent step comes here too
            other.update(replay_dead_letters(second, BatchProcessor("delta_table", accept)))

    stop = observe(meanwhile)
    try:
        with pytest.raises(ReplayRaceError, match="Another replay"):
            replay_dead_letters(first, BatchProcessor("delta_table", accept))
    finally:
        stop()
    assert other["replayed"] == [["0", 1]]
    assert table_ids(uri) == ["a0", "p1"] and [d["status"] for d in first.dead_letters()] == ["replayed"]
    assert replay_dead_letters(first, BatchProcessor("delta_table", accept)) == {"replayed": [], "failed": []}


def printed_json(capsys) -> object:
    """The shell tool's JSON: what it printed from its first line that opens one (Airflow's configuration, first
    imported by the tool when this test runs alone, logs a line to stdout before it)."""
    lines = capsys.readouterr().out.splitlines()
    return json.loads("\n".join(lines[next(i for i, line in enumerate(lines) if line[:1] in "[{"):]))


def test_the_shell_tool_lists_and_replays_a_delta_sinks_dead_letters(tmp_path, capsys):
    uri = str(tmp_path / "orders")
    commit(DeltaIngestStore(DeltaTarget(uri), STREAM), "0", [event("0", 0, {"id": "a0"}),
                                                             event("0", 1, {"id": "p1", "poison": True})])
    cli = ["--delta", uri, "--namespace", STREAM.namespace, "--eventhub", STREAM.eventhub]
    assert main([*cli, "list"]) == 0
    (letter,) = printed_json(capsys)
    assert (letter["sequence_number"], letter["status"], letter["attempts"]) == (1, "dead", 1)
    assert main([*cli, "--row-function", f"{__name__}:accept", "replay", "--partition", "0"]) == 0
    assert printed_json(capsys)["replayed"] == [["0", 1]]
    assert table_ids(uri) == ["a0", "p1"]
    assert main([*cli, "sessions"]) == 2 and "keeps no sessions" in capsys.readouterr().err
    # a table the Delta sink cannot write to (neither a local path nor Azure storage): named, as the operators do
    elsewhere = ["--delta", "s3://bucket/orders", "--namespace", STREAM.namespace, "--eventhub", STREAM.eventhub]
    assert main([*elsewhere, "list"]) == 2 and "local path or to Azure storage" in capsys.readouterr().err


def test_a_replay_in_several_chunks_moves_its_version_forward_per_chunk(tmp_path, monkeypatch):
    uri = str(tmp_path / "orders")
    store = DeltaIngestStore(DeltaTarget(uri), STREAM)
    commit(store, "0", [event("0", 0, {"id": "a0"})] + [event("0", i, {"id": f"p{i}", "poison": True}) for i in (1, 2, 3)])
    monkeypatch.setattr(delta_replay, "CHUNK", 2)
    assert replay_dead_letters(store, BatchProcessor("delta_table", accept))["replayed"] == [["0", 1], ["0", 2], ["0", 3]]
    assert table_ids(uri) == ["a0", "p1", "p2", "p3"]
    assert DeltaTable(uri).transaction_version(replay_app_id(store)) == 1  # two chunks: versions 0 and 1
    assert sorted(d["replay_version"] for d in store.dead_letters()) == [0, 0, 1]
