"""The SQL sink: rows, dead letters, sessions, dedupe marks and checkpoints in one transaction per batch.

:class:`SqlIngestStore` on any supported DB-API connection (SQLite, Postgres, MySQL/MariaDB: one
:class:`~airflow_provider_eh.ingest.sinks.sql.dialects.Dialect` each), its :class:`Transaction` per batch.
"""

from __future__ import annotations

from airflow_provider_eh.ingest.sinks.sql.dialects import DEFAULT_PREFIX, Dialect, check_conn_type, identifier
from airflow_provider_eh.ingest.sinks.sql.store import DeadLetter, SqlCheckpoint, SqlIngestStore, Transaction

__all__ = [
    "DEFAULT_PREFIX",
    "DeadLetter",
    "Dialect",
    "SqlCheckpoint",
    "SqlIngestStore",
    "Transaction",
    "check_conn_type",
    "identifier",
]
