"""The SQL sink's state tables, and the names it writes (no Airflow import).

Every table is keyed by the stream ``(namespace, eventhub, consumer_group)``, so one database can
hold the state of many hubs and consumer groups.

Tables (``prefix`` defaults to ``eh_ingest_``):

``checkpoint``  (stream, partition_id) -> sequence_number, event_offset, owner_id, updated_at.
    The source of truth for where a partition resumes; advanced only by a compare-and-set on the
    sequence number in the batch's transaction.
``dedupe``      (stream, producer_group, partition_id) -> high_water_mark: the highest ``eh.seq``
    applied; events at or below it are duplicates.
``dead_letter`` (stream, partition_id, sequence_number) -> reason, error, failed_at, the event
    (body, properties), status ``dead`` or ``replayed``, attempts, replayed_at.
``session``     (stream, session_key) -> next_sequence, completed.
``deferred``    (stream, session_key, session_sequence) -> the event, waiting for its predecessors.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from airflow_provider_eh.errors import SinkConfigError

if TYPE_CHECKING:
    from airflow_provider_eh.ingest.sinks.sql.dialects import Dialect

DEFAULT_PREFIX = "eh_ingest_"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")


def identifier(name: str, what: str) -> str:
    """``name`` if it is a plain (optionally schema-qualified) SQL identifier; raise otherwise."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise SinkConfigError(
            f"{what} {name!r} is not a plain SQL identifier (letters, digits, underscores, optionally "
            "schema.name); rename it or create a view with such a name."
        )
    return name


def ddl(prefix: str = DEFAULT_PREFIX, dialect: Dialect | None = None) -> list[str]:
    """``CREATE TABLE IF NOT EXISTS`` statements of the state tables."""
    p = identifier(prefix + "x", "table prefix")[:-1]
    k = dialect.key_type if dialect is not None else "TEXT"
    stream = f"namespace {k} NOT NULL, eventhub {k} NOT NULL, consumer_group {k} NOT NULL"
    event = (
        f"partition_id {k} NOT NULL, sequence_number BIGINT NOT NULL, event_offset TEXT, enqueued_time TEXT, "
        "body_base64 TEXT NOT NULL, properties_json TEXT"
    )
    return [
        f"CREATE TABLE IF NOT EXISTS {p}checkpoint ({stream}, partition_id {k} NOT NULL, "
        "sequence_number BIGINT NOT NULL, event_offset TEXT, owner_id TEXT, updated_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, partition_id))",
        f"CREATE TABLE IF NOT EXISTS {p}dedupe ({stream}, producer_group {k} NOT NULL, partition_id {k} NOT NULL, "
        "high_water_mark BIGINT NOT NULL, updated_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, producer_group, partition_id))",
        f"CREATE TABLE IF NOT EXISTS {p}dead_letter ({stream}, {event}, reason TEXT NOT NULL, error TEXT NOT NULL, "
        "failed_at TEXT NOT NULL, status VARCHAR(16) NOT NULL DEFAULT 'dead', attempts INTEGER NOT NULL DEFAULT 1, "
        "replayed_at TEXT, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, partition_id, sequence_number))",
        f"CREATE TABLE IF NOT EXISTS {p}session ({stream}, session_key {k} NOT NULL, next_sequence BIGINT NOT NULL, "
        "completed INTEGER NOT NULL DEFAULT 0, updated_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, session_key))",
        f"CREATE TABLE IF NOT EXISTS {p}deferred ({stream}, session_key {k} NOT NULL, "
        f"session_sequence BIGINT NOT NULL, {event}, deferred_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, session_key, session_sequence))",
    ]
