"""A publisher cut off from blob storage in the middle of its send, while the hub stays reachable.

The first publisher is a real process whose blob traffic goes through a TCP proxy
(:class:`~tests.support.proxy.FaultProxy`); its sends are slow (the endpoint
acknowledges each SDK batch after 3 s, as a busy namespace would), so its send outlasts the 15 s
lease. Once its first SDK batch is in the hub, the proxy freezes: its lease renewals hang until
their bound, its lease runs out, and a second publisher with direct connections waits that out,
claims, recovers by read-back and commits. The first stops at its deadline (once its blob storage is
back, its in-process retry finds the batch committed). The hub is read back
and every event counted: with the hub's fencing none twice; on an endpoint without the feature
(``--no-idempotent-producers``) at most the one SDK batch that was in flight, which the ingest
engine's ``eh.seq`` high-water mark then drops: each event once in the table.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from publish_kit import PublishSetup, batch, events_for

from eventhubs_local import EmulatorProcess
from tests.support.proxy import FaultProxy
from tests.conftest import unique_name

ACK_DELAY_MS = 3000
SDK_BATCH = 1024 * 1024
# batches of the link's size under lease-only fencing too (the default lease_only_batch_bytes would make four
# times as many, each waiting out the ack delay): what is timed above, and what the claim's deadline fences
WHOLE_BATCHES = {"lease_only_batch_bytes": SDK_BATCH}


def _cut_off_mid_send(setup: PublishSetup, hubs: Any, name: str) -> tuple[list[dict], Counter, Any, str]:
    events = events_for(name, 10_000, partitions=1, size=480)  # ~4.8 MB: 5 SDK batches, ~15 s at the ack delay
    batch_id = batch(name)
    hubs.admin.set_fault("delay_ack", hub=setup.hub, ms=ACK_DELAY_MS)
    port = setup.azurite.port
    with FaultProxy("127.0.0.1", port) as proxy:
        blob = setup.azurite.connection_string.replace(f":{port}/", f":{proxy.port}/")
        first = setup.start(events, batch_id, blob=blob, **WHOLE_BATCHES)
        try:
            deadline = time.monotonic() + 120
            while not setup.read_back():
                assert first.poll() is None and time.monotonic() < deadline, "the first SDK batch never landed"
                time.sleep(0.2)
            proxy.freeze()  # its blob traffic: held from now on, connections open
            result = setup.publisher(claim_timeout=90, **WHOLE_BATCHES).publish(events, batch_id=batch_id)["0"]
            proxy.thaw()  # reachable again: its in-process retry finds the batch committed, or it gives up
            out, err = first.communicate(timeout=120)
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
    hubs.admin.clear_faults()
    assert "deadline passed" in err or "fenced at the hub" in err, err[-3000:]  # it was stopped mid-send
    if first.returncode == 0:  # and its retry sent nothing more
        assert json.loads(out.strip().splitlines()[-1])["0"]["status"] == "already_committed", out[-2000:]
    assert result.status == "recovered" and result.landed_count > 0
    return events, Counter(json.loads(e.body)["id"] for e in setup.read_back()), result, err


def test_cut_off_from_blob_storage_mid_send_with_the_hubs_fencing_lands_each_event_once(setup: PublishSetup,
                                                                                        event_hubs: Any) -> None:
    events, counts, result, _err = _cut_off_mid_send(setup, event_hubs, "cut-off")
    assert result.fencing == "hub"
    assert set(counts) == {e["body"]["id"] for e in events} and set(counts.values()) == {1}


def test_cut_off_from_blob_storage_mid_send_without_the_hubs_fencing_lands_at_most_one_batch_twice(
        setup: PublishSetup, tmp_path: Path) -> None:
    with EmulatorProcess(tmp_path / "no-fencing", extra_args=["--no-idempotent-producers"]) as plain:
        hub = unique_name("plain")
        plain.admin.create_hub(hub, partitions=1)
        on_plain = PublishSetup(plain, setup.azurite, hub, setup.container_name)
        events, counts, result, _err = _cut_off_mid_send(on_plain, plain, "cut-off-lease")
        assert result.fencing == "lease"
        assert set(counts) == {e["body"]["id"] for e in events} and set(counts.values()) <= {1, 2}  # nothing lost
        assert sum(n - 1 for n in counts.values()) * 480 <= SDK_BATCH
        # the ingest engine drops what landed twice by the eh.seq high-water mark: each event once in the table
        loaded = _ingest(on_plain, tmp_path / "sink.db")
    assert loaded["rows"] == len(events) and loaded["duplicates"] == sum(n - 1 for n in counts.values())
    assert loaded["ids"] == {e["body"]["id"] for e in events}


def _ingest(setup: PublishSetup, db: Path) -> dict[str, Any]:
    import sqlite3

    from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream

    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE events (id TEXT NOT NULL)")
    endpoint = setup.endpoint
    store = SqlIngestStore(sqlite3.connect(db), Stream(endpoint.namespace, endpoint.eventhub_name, "$Default"))
    try:
        summary = IngestRun(endpoint, "$Default", store, BatchProcessor("events", lambda e: {"id": e.json()["id"]}),
                            owner_id="test", limits=RunLimits(max_duration=120)).run()
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM events")]
    assert len(ids) == len(set(ids))
    return {"rows": len(ids), "ids": set(ids),
            "duplicates": sum(p.get("duplicates", 0) for p in summary["partitions"].values())}
