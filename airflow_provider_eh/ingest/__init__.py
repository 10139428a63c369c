"""Reliable, transactional ingestion from Event Hubs into SQL or Delta Lake (no Airflow import).

- :class:`IngestRun`: one bounded run of one instance (checkpoint -> last event at start);
- :class:`BatchProcessor`: what each batch does in its sink's transaction (rows, dedupe, sessions, dead letters);
- :class:`Sink`: what a sink is to the engine (:mod:`~airflow_provider_eh.ingest.sinks`), implemented by
  :class:`SqlIngestStore` (the state tables on any DB-API connection) and
  :class:`~airflow_provider_eh.ingest.sinks.delta.DeltaIngestStore` (a Delta table whose log holds the checkpoints,
  ``deltalake`` imported only when one is used);
- :func:`replay_dead_letters`, :func:`complete_session`: acting on the stored state afterwards.

``python -m airflow_provider_eh.ingest --help`` lists, replays and completes from a shell.
"""

from __future__ import annotations

from airflow_provider_eh.ingest.admin import complete_session, replay_dead_letters
from airflow_provider_eh.ingest.events import IngestEvent
from airflow_provider_eh.ingest.limits import RunLimits
from airflow_provider_eh.ingest.processor import BatchProcessor, BatchResult
from airflow_provider_eh.ingest.rows import json_rows
from airflow_provider_eh.ingest.runner import STAGES, IngestRun
from airflow_provider_eh.ingest.sessions import FieldRef, SessionConfig
from airflow_provider_eh.ingest.sinks.contract import PartitionCheckpoint, Sink, Stream
from airflow_provider_eh.ingest.sinks.sql import DeadLetter, SqlCheckpoint, SqlIngestStore

__all__ = [
    "STAGES",
    "BatchProcessor",
    "BatchResult",
    "DeadLetter",
    "FieldRef",
    "IngestEvent",
    "IngestRun",
    "PartitionCheckpoint",
    "RunLimits",
    "SessionConfig",
    "Sink",
    "SqlCheckpoint",
    "SqlIngestStore",
    "Stream",
    "complete_session",
    "json_rows",
    "replay_dead_letters",
]
