"""Worker processes SIGKILLed at each step of a batch, one after another, then a clean run: on every
supported database, every event is applied exactly once and the checkpoints agree.

Each database gets one hub and one sequence of processes: a worker killed at ``received`` of its 2nd
batch, the next one (which resumes from what the first left) killed at ``rows_written``, then at
``committed``, then at ``blob_checkpointed``, then a worker that runs to the end. Every killed worker
is a resumed run of the state its predecessor's crash left, so one hub covers all four steps. The
workers are forked from one process per database that imported everything once (``worker.py --serve``).
"""

from __future__ import annotations

import signal
from collections import Counter

import pytest
import sinks
from conftest import TABLE, blob_checkpoints, publish, sql_checkpoints, stamped, table_rows, trace

from airflow_provider_eh.ingest import STAGES

PER_PARTITION = 25
STATE_TABLES = ("checkpoint", "dedupe", "dead_letter", "session", "deferred")


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def database(request, sink_db):
    """The database a worker writes to, emptied, with the target table ``events``."""
    if request.param == "sqlite":
        return str(sink_db)
    db = {"postgres": request.getfixturevalue("postgres")} if request.param == "postgres" else {
        "mysql": request.getfixturevalue("mariadb")
    }
    sinks.execute(db, "DROP TABLE IF EXISTS events", *(f"DROP TABLE IF EXISTS eh_ingest_{t}" for t in STATE_TABLES), TABLE)
    return db


def test_kill_at_every_step_then_resume_applies_each_event_once(
    database, forked_worker, eh_conn_str, azurite, container, tmp_path
):
    publish(eh_conn_str, {p: stamped(p, PER_PARTITION) for p in "0123"})
    total = 4 * PER_PARTITION
    for stage in STAGES:
        # the blob checkpoint is written behind the commits by a thread of its own: commits slowed
        # down for that kill leave work for the resumed run, as the kills on the committing thread do
        slow = {"pause": 0.2, "pause_at": ["committed"]} if stage == "blob_checkpointed" else {}
        code, output = forked_worker(db=database, crash={"stage": stage, "batch": 2}, **slow)
        assert code == -signal.SIGKILL, (stage, output[-2000:])
        steps = trace(tmp_path)
        killed = [t for t in steps if t["stage"] == stage and t["batch"] >= 2]
        assert killed, f"no {stage} of a 2nd or later batch in the trace of the worker killed there"
        if stage != "blob_checkpointed":  # the committing thread's last step is the one it was killed at
            assert [t for t in steps if t["stage"] != "blob_checkpointed"][-1]["stage"] == stage, (stage, steps[-3:])
        rows = table_rows(database)
        assert 0 < len(rows) < total, f"the worker killed at {stage} had applied {len(rows)} of {total} events: nothing to resume"
        assert max(Counter(r[0] for r in rows).values(), default=1) == 1, f"an event applied twice after a kill at {stage}"
        (tmp_path / "trace.jsonl").unlink()

    code, output = forked_worker(db=database)
    assert code == 0, output[-2000:]

    rows = table_rows(database)
    counts = Counter(r[0] for r in rows)
    assert set(counts) == {f"p{p}-{i}" for p in "0123" for i in range(PER_PARTITION)}
    assert max(counts.values()) == 1
    assert sql_checkpoints(database) == {p: PER_PARTITION - 1 for p in "0123"}
    for p in "0123":
        assert max(r[2] for r in rows if r[1] == p) == sql_checkpoints(database)[p]
    assert blob_checkpoints(azurite, container, eh_conn_str) == {p: PER_PARTITION - 1 for p in "0123"}
