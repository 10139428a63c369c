"""The consumer side's SQL tables, and the few dialect differences between SQLite and Postgres.

Every table is keyed by the stream ``(namespace, eventhub, consumer_group)``, so one database can
hold the state of many hubs and consumer groups. The statements are plain SQL that SQLite (3.24+)
and Postgres both run (``INSERT ... ON CONFLICT``, ``SAVEPOINT``); only the parameter marker and the
way a transaction is opened differ, and :class:`Dialect` covers both.

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
import sys
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.errors import SinkConfigError

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


def ddl(prefix: str = DEFAULT_PREFIX) -> list[str]:
    """``CREATE TABLE IF NOT EXISTS`` statements of the state tables."""
    p = identifier(prefix + "x", "table prefix")[:-1]
    stream = "namespace TEXT NOT NULL, eventhub TEXT NOT NULL, consumer_group TEXT NOT NULL"
    event = (
        "partition_id TEXT NOT NULL, sequence_number BIGINT NOT NULL, event_offset TEXT, enqueued_time TEXT, "
        "body_base64 TEXT NOT NULL, properties_json TEXT"
    )
    return [
        f"CREATE TABLE IF NOT EXISTS {p}checkpoint ({stream}, partition_id TEXT NOT NULL, "
        "sequence_number BIGINT NOT NULL, event_offset TEXT, owner_id TEXT, updated_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, partition_id))",
        f"CREATE TABLE IF NOT EXISTS {p}dedupe ({stream}, producer_group TEXT NOT NULL, partition_id TEXT NOT NULL, "
        "high_water_mark BIGINT NOT NULL, updated_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, producer_group, partition_id))",
        f"CREATE TABLE IF NOT EXISTS {p}dead_letter ({stream}, {event}, reason TEXT NOT NULL, error TEXT NOT NULL, "
        "failed_at TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'dead', attempts INTEGER NOT NULL DEFAULT 1, "
        "replayed_at TEXT, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, partition_id, sequence_number))",
        f"CREATE TABLE IF NOT EXISTS {p}session ({stream}, session_key TEXT NOT NULL, next_sequence BIGINT NOT NULL, "
        "completed INTEGER NOT NULL DEFAULT 0, updated_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, session_key))",
        f"CREATE TABLE IF NOT EXISTS {p}deferred ({stream}, session_key TEXT NOT NULL, "
        f"session_sequence BIGINT NOT NULL, {event}, deferred_at TEXT NOT NULL, "
        "PRIMARY KEY (namespace, eventhub, consumer_group, session_key, session_sequence))",
    ]


@dataclass(frozen=True)
class Dialect:
    """
    How to talk to one DB-API driver.

    :param name: ``sqlite`` or the driver's module name.
    :param paramstyle: the driver's ``paramstyle``; statements are written with ``?`` and rewritten.
    """

    name: str
    paramstyle: str

    @classmethod
    def of(cls, conn: Any) -> Dialect:
        module = type(conn).__module__.split(".")[0]
        if module in ("sqlite3", "_sqlite3"):
            return cls("sqlite", "qmark")
        driver = sys.modules.get(module)
        return cls(module, getattr(driver, "paramstyle", "format"))

    @property
    def is_sqlite(self) -> bool:
        return self.name == "sqlite"

    def sql(self, statement: str) -> str:
        """``statement`` with ``?`` markers rewritten for the driver."""
        if self.paramstyle == "qmark":
            return statement
        if self.paramstyle in ("format", "pyformat"):
            return statement.replace("%", "%%").replace("?", "%s")
        if self.paramstyle == "numeric":
            parts = statement.split("?")
            return "".join(part + (f":{i + 1}" if i < len(parts) - 1 else "") for i, part in enumerate(parts))
        raise SinkConfigError(f"DB-API paramstyle {self.paramstyle!r} of driver {self.name!r} is not supported")

    def prepare(self, conn: Any) -> None:
        """Put a fresh connection in the mode the store expects (explicit transactions on SQLite)."""
        if self.is_sqlite:
            conn.isolation_level = None  # we issue BEGIN IMMEDIATE / COMMIT ourselves
            conn.execute("PRAGMA busy_timeout = 60000")

    def begin(self, conn: Any) -> None:
        if self.is_sqlite:
            conn.execute("BEGIN IMMEDIATE")

    def commit(self, conn: Any) -> None:
        if self.is_sqlite:
            conn.execute("COMMIT")
        else:
            conn.commit()

    def rollback(self, conn: Any) -> None:
        if self.is_sqlite:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        else:
            conn.rollback()
