"""The test databases of ingestion: throwaway Postgres and MariaDB servers (also used by
``bench/ingest.py``), databases as worker configs (``str``: a SQLite file, ``{"postgres": DSN}``,
``{"mysql": {host, port, user, database}}``) and the few queries the tests check them with."""

from __future__ import annotations

import glob
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow_provider_eh.testing.ports import free_port


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


@contextmanager
def postgres_server() -> Iterator[str | None]:
    """
    A throwaway Postgres server (Debian's ``postgresql`` binaries: ``initdb`` + ``postgres``) on a
    free 127.0.0.1 port; its DSN, or ``None`` where none is installed.
    """
    bindirs = [None, *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    initdb = next((found for d in bindirs if (found := shutil.which("initdb", path=d))), None)
    server = next((found for d in bindirs if (found := shutil.which("postgres", path=d))), None)
    if not initdb or not server:
        yield None
        return
    data = Path(tempfile.mkdtemp(prefix="eh-tests-postgres-"))  # outside pytest's 0700 tree: the server user reads it
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        shutil.chown(data, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_user, initdb, "-D", str(data / "db"), "-A", "trust", "-U", "postgres"], check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen(
        [*as_user, server, "-D", str(data / "db"), "-p", str(port), "-h", "127.0.0.1", "-k", str(data), "-F"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    try:
        import psycopg2

        _wait(proc, lambda: psycopg2.connect(dsn).close(), psycopg2.OperationalError)
        yield dsn
    finally:
        _stop(proc, data)


@contextmanager
def mariadb_server() -> Iterator[dict | None]:
    """
    A throwaway MariaDB server (Debian's ``mariadb-server``: ``mariadb-install-db`` + ``mariadbd``)
    on a free 127.0.0.1 port with its own socket and data directory, a database ``ingest`` created;
    PyMySQL connection arguments, or ``None`` where none is installed.
    """
    install = shutil.which("mariadb-install-db") or shutil.which("mariadb-install-db", path="/usr/bin")
    server = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin")
    if not install or not server:
        yield None
        return
    data = Path(tempfile.mkdtemp(prefix="eh-tests-mariadb-"))  # outside pytest's 0700 tree: the server user reads it
    user = ["--user=mysql"] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        shutil.chown(data, "mysql")
    subprocess.run(
        [install, "--no-defaults", f"--datadir={data / 'db'}", "--auth-root-authentication-method=normal",
         "--skip-test-db", *user],
        check=True, capture_output=True,
    )
    port = free_port()
    proc = subprocess.Popen(
        [server, "--no-defaults", f"--datadir={data / 'db'}", f"--socket={data / 'mysqld.sock'}", f"--port={port}",
         "--bind-address=127.0.0.1", "--skip-name-resolve", "--skip-grant-tables",
         f"--pid-file={data / 'mysqld.pid'}", *user],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    args = {"host": "127.0.0.1", "port": port, "user": "root"}
    try:
        import pymysql

        _wait(proc, lambda: pymysql.connect(**args).close(), pymysql.err.OperationalError)
        conn = pymysql.connect(**args)
        conn.cursor().execute("CREATE DATABASE ingest")
        conn.close()
        yield {**args, "database": "ingest"}
    finally:
        _stop(proc, data)


def _wait(proc: subprocess.Popen, probe: Callable[[], None], refused: type[BaseException]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            probe()
            return
        except refused:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.2)


def _stop(proc: subprocess.Popen, data: Path) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(data, ignore_errors=True)
