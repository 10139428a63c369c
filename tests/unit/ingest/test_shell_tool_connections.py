"""The ingestion command line reads Airflow connections through the shell, and needs no Airflow without one."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime

from airflow_provider_eh.ingest import IngestEvent, SqlIngestStore, Stream
from airflow_provider_eh.ingest.__main__ import Connections, airflow_connections, main

STREAM = Stream("ns.example", "orders", "$Default")


def with_a_dead_letter(path: str) -> None:
    store = SqlIngestStore(sqlite3.connect(path, isolation_level=None), STREAM)
    event = IngestEvent("0", 7, "700", datetime(2026, 1, 1, tzinfo=UTC), b'{"id": 7}', {})
    with store.transaction() as tx:
        tx.dead_letter(event, "rejected", "no column id")
    store.close()


class SqliteConnections:
    """Connection ids that name SQLite files: what a deployment without Airflow could hand the command line."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self.asked: list[str] = []

    def sql(self, conn_id: str) -> sqlite3.Connection:
        self.asked.append(conn_id)
        return sqlite3.connect(self.files[conn_id])

    def delta_storage_options(self, uri: str, wasb_conn_id: str) -> dict[str, str] | None:
        raise AssertionError("not asked for here")

    def schema_registry(self, conn_id: str):
        raise AssertionError("not asked for here")


def test_a_sql_conn_id_is_read_through_the_connections_the_command_line_is_given(tmp_path, capsys) -> None:
    db = str(tmp_path / "sink.db")
    with_a_dead_letter(db)
    connections = SqliteConnections({"sink": db})
    argv = ["--sql-conn-id", "sink", "--namespace", STREAM.namespace, "--eventhub", STREAM.eventhub, "list"]
    assert main(argv, connections=lambda: connections) == 0
    (letter,) = json.loads(capsys.readouterr().out)
    assert (letter["sequence_number"], letter["reason"], letter["error"]) == (7, "rejected", "no column id")
    assert connections.asked == ["sink"]


def test_the_default_connections_are_the_airflow_shells_and_keep_the_interface() -> None:
    connections = airflow_connections()
    assert type(connections).__module__ == "airflow_provider_eh.hooks.ingest_connections"
    assert all(callable(getattr(connections, name)) for name in ("sql", "delta_storage_options", "schema_registry"))
    assert {"sql", "delta_storage_options", "schema_registry"} <= set(vars(Connections))


def test_the_command_line_on_a_sqlite_file_loads_no_airflow(tmp_path) -> None:
    db = str(tmp_path / "sink.db")
    with_a_dead_letter(db)
    script = (
        "import json, sys\n"
        "from airflow_provider_eh.ingest.__main__ import main\n"
        f"code = main(['--sqlite', {db!r}, '--namespace', {STREAM.namespace!r}, '--eventhub', {STREAM.eventhub!r}, "
        "'list'])\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m == 'airflow' or m.startswith(('airflow.', "
        "'airflow_provider_eh.hooks')))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    code, loaded = json.loads(out.splitlines()[-1])
    assert json.loads("\n".join(out.splitlines()[:-1]))[0]["sequence_number"] == 7
    assert (code, loaded) == (0, [])
