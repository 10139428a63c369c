"""Throwaway database servers on 127.0.0.1 for tests and benchmarks: Postgres and MariaDB.

Each runs Debian's server binaries (``postgresql``, ``mariadb-server``) on a free port with a data
directory of its own, removed when the context ends; where the binaries are not installed the context
yields ``None``. Used by the ingestion tests (sinks), ``bench/ingest.py`` and the tests that run
``airflow standalone`` on a Postgres metadata database.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from eventhubs_local.ports import free_port


def start_postgres(data: Path, *, detached: bool = False,
                   env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen, str] | None:
    """
    Initialise a Postgres cluster in ``data / "db"`` and start its server (Debian's ``postgresql``
    binaries: ``initdb`` + ``postgres``) on a free 127.0.0.1 port, its socket in ``data``; the process
    and its DSN once it accepts connections, or ``None`` where no Postgres is installed.

    :param data: a folder the server's user can reach (outside a 0700 tree such as pytest's).
    :param detached: in a session of its own, to outlive the caller (``make deployment``).
    :param env: the server's environment (default: this process's).
    """
    bindirs = [None, *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    initdb = next((found for d in bindirs if (found := shutil.which("initdb", path=d))), None)
    server = next((found for d in bindirs if (found := shutil.which("postgres", path=d))), None)
    if not initdb or not server:
        return None
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        shutil.chown(data, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_user, initdb, "-D", str(data / "db"), "-A", "trust", "-U", "postgres"], check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen(
        [*as_user, server, "-D", str(data / "db"), "-p", str(port), "-h", "127.0.0.1", "-k", str(data), "-F"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=detached,
        env=None if env is None else dict(env),
    )
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    import psycopg2

    try:
        _wait(proc, lambda: psycopg2.connect(dsn).close(), psycopg2.OperationalError)
    except BaseException:
        _stop(proc, data)
        raise
    return proc, dsn


@contextmanager
def postgres_server() -> Iterator[str | None]:
    """
    A throwaway Postgres server (:func:`start_postgres`) on a free 127.0.0.1 port; its DSN, or ``None``
    where none is installed. Its data directory is removed when the context ends.
    """
    data = Path(tempfile.mkdtemp(prefix="eh-tests-postgres-"))  # outside pytest's 0700 tree: the server user reads it
    started = start_postgres(data)
    if started is None:
        shutil.rmtree(data, ignore_errors=True)
        yield None
        return
    proc, dsn = started
    try:
        yield dsn
    finally:
        _stop(proc, data)


def postgres_database(dsn: str, name: str) -> str:
    """Create database ``name`` on the Postgres server at ``dsn``; its SQLAlchemy URL (psycopg2 driver).

    One server serves several Airflow instances, each with a metadata database of its own.
    """
    import psycopg2

    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        conn.cursor().execute(f'CREATE DATABASE "{name}"')
    finally:
        conn.close()
    return dsn.replace("postgresql://", "postgresql+psycopg2://", 1).rsplit("/", 1)[0] + f"/{name}"


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
    import pymysql

    for attempt in range(3):  # a port taken between free_port() and the server's bind: another port
        port = free_port()
        log = data / f"mariadbd-{attempt}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [server, "--no-defaults", f"--datadir={data / 'db'}", f"--socket={data / 'mysqld.sock'}", f"--port={port}",
                 "--bind-address=127.0.0.1", "--skip-name-resolve", "--skip-grant-tables",
                 f"--pid-file={data / 'mysqld.pid'}", *user],
                stdout=out, stderr=subprocess.STDOUT,
            )
        args = {"host": "127.0.0.1", "port": port, "user": "root"}
        try:
            _wait(proc, lambda: pymysql.connect(**args).close(), pymysql.err.OperationalError)
            break
        except pymysql.err.OperationalError as exc:
            exited = proc.poll() is not None  # ended by itself (its port taken): try another; else it hung
            _stop(proc, None)
            if attempt == 2 or not exited:
                output = log.read_text(errors="replace")[-3000:]
                shutil.rmtree(data, ignore_errors=True)
                raise RuntimeError(f"MariaDB did not start on port {port}: {exc}\n{output}") from exc
    try:
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


def _stop(proc: subprocess.Popen, data: Path | None) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if data is not None:
        shutil.rmtree(data, ignore_errors=True)
