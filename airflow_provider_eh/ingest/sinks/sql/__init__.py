"""The SQL sink: rows, dead letters, sessions, dedupe marks and checkpoints in one transaction per batch.

:class:`SqlIngestStore` on any supported DB-API connection (SQLite, Postgres, MySQL/MariaDB: one
:class:`~airflow_provider_eh.ingest.sinks.sql.dialects.Dialect` each), its :class:`Transaction` per batch.
"""

from __future__ import annotations

from airflow_provider_eh.ingest.sinks.contract import PartitionCheckpoint
from airflow_provider_eh.ingest.sinks.sql.dialects import Dialect, check_conn_type
from airflow_provider_eh.ingest.sinks.sql.events import DeadLetter
from airflow_provider_eh.ingest.sinks.sql.store import SqlIngestStore, Transaction
from airflow_provider_eh.ingest.sinks.sql.tables import DEFAULT_PREFIX, identifier

#: the checkpoint record under the name it had before the Delta sink shared it
SqlCheckpoint = PartitionCheckpoint

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
