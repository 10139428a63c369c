"""Reliable, transactional ingestion from Event Hubs into SQL or Delta Lake (no Airflow import).

- :class:`IngestRun`: one bounded run of one instance (checkpoint -> last event at start);
- :class:`BatchProcessor`: what each batch does in its SQL transaction (rows, dedupe, sessions, dead letters);
- :class:`SqlIngestStore`: the state tables on any DB-API connection;
- :class:`~airflow_provider_eh.ingest.delta.DeltaIngestStore`: a Delta table whose log holds the checkpoints
  (``deltalake`` imported only when one is used);
- :func:`replay_dead_letters`, :func:`complete_session`: acting on the stored state afterwards.

``python -m airflow_provider_eh.ingest --help`` lists, replays and completes from a shell.
"""

from __future__ import annotations

from airflow_provider_eh.ingest.admin import complete_session, replay_dead_letters
from airflow_provider_eh.ingest.events import IngestEvent
from airflow_provider_eh.ingest.limits import RunLimits
from airflow_provider_eh.ingest.processor import BatchProcessor, BatchResult, FieldRef, SessionConfig, json_rows
from airflow_provider_eh.ingest.runner import STAGES, IngestRun
from airflow_provider_eh.ingest.store import DeadLetter, SqlCheckpoint, SqlIngestStore, Stream

__all__ = [
    "STAGES",
    "BatchProcessor",
    "BatchResult",
    "DeadLetter",
    "FieldRef",
    "IngestEvent",
    "IngestRun",
    "RunLimits",
    "SessionConfig",
    "SqlCheckpoint",
    "SqlIngestStore",
    "Stream",
    "complete_session",
    "json_rows",
    "replay_dead_letters",
]
