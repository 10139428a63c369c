"""The operators through Airflow itself: ``dag.test()`` with ``AIRFLOW_CONN_*`` connections.

Airflow 3.3's ``dag.test()`` runs DAGs it finds in a DAG bundle, so the DAG is written to a DAGs
folder of the test's own, and ``dag.test()`` runs in a fresh process pointed at it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

from conftest import publish, stamped

from tests.conftest import connection_env
from airflow_provider_eh.testing.dag_test import failure_report

RUN_DAG_TEST = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("ingest_orders", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(f"state={module.dag.test().state}")
"""

DAG_FILE = '''
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.operators.ingest import EventHubDeadLetterReplayOperator, EventHubIngestOperator


def accept_raw(event):
    """The fixed row function: a body that is not JSON is kept as its text."""
    return {"id": event.text(), "amount": 0}


with DAG(dag_id="ingest_orders", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc)) as dag:
    ingest = EventHubIngestOperator.partial(
        task_id="ingest",
        table="orders",
        sql_conn_id="orders_db",
        columns=["id", "amount"],
        checkpoint_container="ingest-checkpoints",
        instances=2,
        ownership_expiry=3,
        max_wait_time=0.3,
        max_duration=60,
    ).expand(instance=[0, 1])
    replay = EventHubDeadLetterReplayOperator(
        task_id="replay", table="orders", sql_conn_id="orders_db", row_function=accept_raw,
    )
    ingest >> replay
'''


def test_mapped_ingest_and_dead_letter_replay_through_dag_test(airflow_db, connections, eh_conn_str, tmp_path, monkeypatch):
    db = tmp_path / "orders.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id TEXT NOT NULL, amount INTEGER)")
    monkeypatch.setenv(*connection_env("orders_db", "sqlite", host=str(db)))
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "ingest_orders.py").write_text(textwrap.dedent(DAG_FILE))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))

    events = {p: [{"body": {"id": f"p{p}-{i}", "amount": i}, "properties": s["properties"]}
                  for i, s in enumerate(stamped(p, 5))] for p in "0123"}
    publish(eh_conn_str, events)
    publish(eh_conn_str, {"1": [{"body": "not json"}]})

    # a fresh process: Airflow reads DAGS_FOLDER once, and earlier tests in this one may hold ORM state
    run = subprocess.run(
        [sys.executable, "-c", RUN_DAG_TEST, str(dags / "ingest_orders.py")],
        capture_output=True, text=True, timeout=360, env=os.environ.copy(),
    )
    assert run.returncode == 0, failure_report(run.stdout + run.stderr)
    assert run.stdout.strip().splitlines()[-1] == "state=success", failure_report(run.stdout + run.stderr)
    with sqlite3.connect(db) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM orders")]
        letters = conn.execute("SELECT partition_id, status FROM eh_ingest_dead_letter").fetchall()
        owners = {r[0] for r in conn.execute("SELECT owner_id FROM eh_ingest_checkpoint")}
    assert sorted(ids) == sorted([f"p{p}-{i}" for p in "0123" for i in range(5)] + ['"not json"'])
    assert letters == [("1", "replayed")]
    assert all(o.startswith("ingest_orders.ingest.") for o in owners)
