"""Where ingestion writes: the sink contract, and one folder per sink (no Airflow import).

- :mod:`~airflow_provider_eh.ingest.sinks.contract`: :class:`Sink` and :class:`BatchTransaction` (with the
  capabilities :class:`SessionTransaction` and :class:`ReplayTransaction`), and the records sinks share;
- :mod:`~airflow_provider_eh.ingest.sinks.sql`: the state tables and rows on any supported DB-API connection;
- :mod:`~airflow_provider_eh.ingest.sinks.delta`: a Delta table whose log holds the checkpoints (``deltalake``
  imported only when one is used).

The engine imports this contract only; operators and the command line choose a sink.

A sink of your own is any object that keeps the contract, given to :class:`~airflow_provider_eh.ingest.IngestRun`:
a :class:`Sink` reads each partition's checkpoint and opens one :class:`BatchTransaction` per batch, and
everything the transaction is given (rows, dead letters, dedupe marks, the checkpoint's move) lands when its
``with`` block ends, or none of it. A store that cannot commit all or nothing, with a compare-and-set on the
checkpoint, cannot be a sink. In-order sessions need a :class:`SessionTransaction`; a sink without says so with
``keeps_sessions = False``.
"""

from __future__ import annotations

from airflow_provider_eh.ingest.sinks.contract import (
    NO_CHECKPOINT,
    BatchTransaction,
    PartitionCheckpoint,
    ReplayTransaction,
    SessionTransaction,
    Sink,
    Stream,
)

__all__ = [
    "NO_CHECKPOINT",
    "BatchTransaction",
    "PartitionCheckpoint",
    "ReplayTransaction",
    "SessionTransaction",
    "Sink",
    "Stream",
]
