"""The test databases of ingestion (the servers: ``tests.support.databases``): databases as worker configs (``str``: a SQLite file, ``{"postgres": DSN}``,
``{"mysql": {host, port, user, database}}``) and the few queries the tests check them with."""

from __future__ import annotations

import sqlite3
from typing import Any


def connect(db: Any) -> Any:
    """A DB-API connection to the test database ``db``."""
    if isinstance(db, str):
        return sqlite3.connect(db)
    if "postgres" in db:
        import psycopg2

        return psycopg2.connect(db["postgres"])
    if "mysql" in db:
        import pymysql

        return pymysql.connect(**db["mysql"])
    raise ValueError(f"unknown test database {db!r}")


def query(db: Any, statement: str) -> list[tuple]:
    conn = connect(db)
    try:
        cur = conn.cursor()
        cur.execute(statement)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


def execute(db: Any, *statements: str) -> None:
    conn = connect(db)
    try:
        cur = conn.cursor()
        for statement in statements:
            cur.execute(statement)
        conn.commit()
    finally:
        conn.close()


def table_rows(db: Any) -> list[tuple[str, str, int]]:
    return [
        (str(i), str(p), int(s))
        for i, p, s in query(db, "SELECT id, partition_id, sequence_number FROM events ORDER BY partition_id, sequence_number")
    ]


def sql_checkpoints(db: Any) -> dict[str, int]:
    return {str(p): int(s) for p, s in query(db, "SELECT partition_id, sequence_number FROM eh_ingest_checkpoint")}
