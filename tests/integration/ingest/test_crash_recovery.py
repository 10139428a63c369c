"""A worker process SIGKILLed at each point of the batch loop, then rerun: every event exactly once."""

from __future__ import annotations

import signal
from collections import Counter

import pytest
from azure.storage.blob import ContainerClient
from conftest import publish, sql_checkpoints, stamped, table_rows, trace

from airflow_provider_eh.checkpoints.blob_layout import CheckpointReader
from airflow_provider_eh.client.endpoint import EventHubsEndpoint

PER_PARTITION = 25


def blob_checkpoints(azurite, container, eh_conn_str) -> dict[str, int | None]:
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)
    client = ContainerClient.from_connection_string(azurite.connection_string, container)
    read = CheckpointReader(client, endpoint.fully_qualified_namespace, endpoint.eventhub_name).read("$Default")
    return {p: read.sequence_number(p) for p in read.checkpoints}


@pytest.mark.parametrize("stage", ["received", "rows_written", "committed", "blob_checkpointed"])
def test_rerun_after_sigkill_at_each_stage_ingests_every_event_exactly_once(
    stage, run_worker, eh_conn_str, sink_db, azurite, container, tmp_path
):
    publish(eh_conn_str, {p: stamped(p, PER_PARTITION) for p in "0123"})
    # batch 5 of the run (partitions are received in parallel): some batches are committed before it, some not
    crashed = run_worker(crash={"stage": stage, "batch": 5})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert [t["stage"] for t in trace(tmp_path)][-1] == stage
    before = len(table_rows(sink_db))
    assert 0 < before < 4 * PER_PARTITION

    rerun = run_worker(owner="w0")
    assert rerun.returncode == 0, rerun.stderr[-2000:]

    rows = table_rows(sink_db)
    counts = Counter(r[0] for r in rows)
    assert set(counts) == {f"p{p}-{i}" for p in "0123" for i in range(PER_PARTITION)}
    assert max(counts.values()) == 1
    assert sql_checkpoints(sink_db) == {p: PER_PARTITION - 1 for p in "0123"}
    for p in "0123":
        assert max(r[2] for r in rows if r[1] == p) == sql_checkpoints(sink_db)[p]
    assert blob_checkpoints(azurite, container, eh_conn_str) == {p: PER_PARTITION - 1 for p in "0123"}
