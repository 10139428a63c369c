"""What the SQL batch processor's unit tests share: a SQLite sink store with a table of theirs, and a batch applied
in one transaction with its checkpoint, as a run commits it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow_provider_eh.ingest import BatchProcessor, IngestEvent, SqlIngestStore, Stream


@contextmanager
def sqlite_store(path: Path, ddl: str) -> Iterator[SqlIngestStore]:
    """A store over a new SQLite database at ``path`` in which ``ddl`` created the sink table."""
    conn = sqlite3.connect(path)
    conn.execute(ddl)
    conn.commit()
    store = SqlIngestStore(conn, Stream("ns.local", "hub", "$Default"))
    try:
        yield store
    finally:
        store.close()


def apply(store: SqlIngestStore, processor: BatchProcessor, events: list[IngestEvent], partition: str = "0",
          expected: int = -1) -> Any:
    """``events`` processed and the checkpoint moved from ``expected`` to the last of them, in one transaction."""
    with store.transaction() as tx:
        result = processor.process(tx, partition, events)
        tx.advance_checkpoint(partition, expected, events[-1].sequence_number, events[-1].offset, "me")
    return result
