"""Beside the Azure provider, the publish operator (blob state), the ingest operator and the checkpoint
sensor still authenticate with ``wasb`` connections, and those connections are the Azure provider's.

One ``dag.test()`` in a fresh process (Airflow runs DAGs from a bundle, so the DAG file is written to
a DAGs folder of the test's own) against the local endpoint and Azurite: publish → ingest → wait, then
a task that opens the same connections through ``Connection.get_hook()``, which must give the Azure
provider's ``WasbHook``. Two ``wasb`` connections with different fields: a connection string (the
state store) and account URL + login + key (the checkpoint container).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from eventhubs_local.azurite import ACCOUNT_KEY, ACCOUNT_NAME
from airflow_provider_eh.client.readback import read_hub
from tests.conftest import REPO, connection_env

# in requirements/dev.lock: a missing provider is a broken environment, not a reason to skip
import airflow.providers.microsoft.azure  # noqa: E402, F401
from airflow_provider_eh.testing.dag_test import failure_report  # noqa: E402

RUN_DAG_TEST = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("coexist", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.dag.test()
print("states=" + ",".join(f"{ti.task_id}:{ti.state}" for ti in sorted(run.get_task_instances(), key=lambda t: t.task_id)))
"""

DAG_FILE = '''
import json, os
from datetime import datetime, timezone

from airflow.sdk import DAG, BaseHook, task

from airflow_provider_eh.operators.ingest import EventHubIngestOperator
from airflow_provider_eh.operators.publish import EventHubPublishOperator
from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor

STATE, CHECKPOINTS = os.environ["EH_STATE_CONTAINER"], os.environ["EH_CHECKPOINT_CONTAINER"]

with DAG(dag_id="coexist", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc)) as dag:
    publish = EventHubPublishOperator(
        task_id="publish",
        events=[{"body": {"id": f"order-{i}"}, "partition_key": f"customer-{i % 5}"} for i in range(20)],
        wasb_conn_id="blob_state",
        state_container=STATE,
    )
    ingest = EventHubIngestOperator(
        task_id="ingest", table="orders", sql_conn_id="orders_db", columns=["id"],
        wasb_conn_id="blob_checkpoints", checkpoint_container=CHECKPOINTS, max_wait_time=0.3, max_duration=60,
    )
    wait = EventHubCheckpointSensor(
        task_id="wait", checkpoint_container=CHECKPOINTS, targets=publish.output, wasb_conn_id="blob_checkpoints",
        poke_interval=0.5, timeout=60,
    )

    @task
    def azure_provider_reads_the_same_connections():
        found = {}
        for conn_id, container in (("blob_state", STATE), ("blob_checkpoints", CHECKPOINTS)):
            hook = BaseHook.get_connection(conn_id).get_hook()
            found[conn_id] = {"hook": type(hook).__module__ + "." + type(hook).__name__,
                              "blobs": sorted(hook.get_blobs_list_recursive(container))}
        with open(os.environ["EH_REPORT"], "w") as fh:
            json.dump(found, fh)

    publish >> ingest >> wait >> azure_provider_reads_the_same_connections()
'''


def test_publish_ingest_and_sensor_authenticate_with_wasb_connections_owned_by_the_azure_provider(
    airflow_db: Path, azurite: Any, event_hubs: Any, hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from azure.storage.blob import BlobServiceClient

    db = tmp_path / "orders.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (id TEXT NOT NULL)")
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    for container in ("coexist-state", "coexist-checkpoints"):
        service.create_container(container)
    for name, value in (
        connection_env("azure_event_hubs_default", "azure_event_hubs", extra={"connection_string": event_hubs.connection_string(hub)}),
        connection_env("blob_state", "wasb", extra={"connection_string": azurite.connection_string}),
        connection_env("blob_checkpoints", "wasb", host=f"http://{azurite.host}:{azurite.port}/{ACCOUNT_NAME}",
                       login=ACCOUNT_NAME, password=ACCOUNT_KEY),
        connection_env("orders_db", "sqlite", host=str(db)),
        ("EH_STATE_CONTAINER", "coexist-state"),
        ("EH_CHECKPOINT_CONTAINER", "coexist-checkpoints"),
        ("EH_REPORT", str(tmp_path / "report.json")),
        ("PYTHONPATH", str(REPO)),
    ):
        monkeypatch.setenv(name, value)
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "coexist.py").write_text(textwrap.dedent(DAG_FILE))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))

    run = subprocess.run([sys.executable, "-c", RUN_DAG_TEST, str(dags / "coexist.py")],
                         capture_output=True, text=True, timeout=300, env=os.environ.copy())
    output = run.stdout + run.stderr
    assert run.returncode == 0, failure_report(output)
    assert run.stdout.strip().splitlines()[-1] == (
        "states=azure_provider_reads_the_same_connections:success,ingest:success,publish:success,wait:success"
    ), output[-4000:]
    assert "has been already registered" not in output

    published = read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub))
    assert sorted(json.loads(e.body)["id"] for e in published) == sorted(f"order-{i}" for i in range(20))
    with sqlite3.connect(db) as conn:
        assert sorted(r[0] for r in conn.execute("SELECT id FROM orders")) == sorted(f"order-{i}" for i in range(20))

    report = json.loads((tmp_path / "report.json").read_text())
    wasb_hook = "airflow.providers.microsoft.azure.hooks.wasb.WasbHook"
    assert {conn_id: found["hook"] for conn_id, found in report.items()} == {"blob_state": wasb_hook, "blob_checkpoints": wasb_hook}
    assert report["blob_state"]["blobs"], "the publish task wrote no producer state"
    checkpointed = {b.rsplit("/", 1)[1] for b in report["blob_checkpoints"]["blobs"] if "/checkpoint/" in b}
    assert checkpointed >= {e.partition for e in published}, report["blob_checkpoints"]["blobs"]
