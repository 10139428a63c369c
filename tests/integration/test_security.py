"""Secrets stay in connections: a publish run through Airflow (``dag.test`` in a fresh process) with
connections whose SAS key and storage account key are distinctive strings leaves them in no log line,
no XCom value, no state blob, no Variable and nowhere in the metadata DB, also when a task fails on a
refused key; the hooks register every secret with the masker that a worker's supervisor applies to
task logs; the local endpoint and Azurite listen on 127.0.0.1 only.

``dag.test`` runs tasks in-process and applies no masking to their logs (Airflow 3.3: a line a DAG
author logs with a connection's extra in it is printed as is there); in a worker the supervisor
redacts every line with the secrets the task registered, which is what the masker test pins.

That the endpoint started with ``--require-auth`` refuses a token signed for another hub is pinned by
``tests/integration/emulator/test_emulator_auth.py::test_token_for_another_hub_is_refused``.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from azure.storage.blob import BlobServiceClient

from eventhubs_local import EmulatorProcess
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from eventhubs_local.azurite import AzuriteProcess
from airflow_provider_eh.client.readback import read_hub
from tests.conftest import REPO, connection_env, unique_name
from tests.support.airflow_home import migrated_home
from airflow_provider_eh.testing.dag_test import failure_report

MARK = uuid.uuid4().hex[:10]
EH_KEY = f"EhSasKey-{MARK}-do-not-log"
WRONG_EH_KEY = f"WrongSasKey-{MARK}-do-not-log"
ACCOUNT = "secureacct"
WASB_KEY = base64.b64encode(f"WasbAccountKey-{MARK}-do-not-log".encode()).decode()
SECRETS = {"SAS key": EH_KEY, "refused SAS key": WRONG_EH_KEY, "account key": WASB_KEY}
FERNET_KEY = "t8tKM1Dc9vVqJ7q0d5qf3kE8u2m4b6m0Zr3xLw9yQ1A="

DAG_FILE = '''
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.operators.publish import EventHubPublishOperator


def orders(context):
    day = context["data_interval_start"].date().isoformat()
    return [{"body": {"id": f"{day}-{i}"}, "partition_key": f"k{i}"} for i in range(200)]


with DAG(dag_id="secure_publish", schedule="@daily", start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False) as dag:
    common = dict(events=orders, event_hubs_conn_id="eh_secure", wasb_conn_id="wasb_secure")
    EventHubPublishOperator(task_id="publish_blob", state_container="secure-state", **common)
    EventHubPublishOperator(task_id="publish_variable", state_backend="variable", **common)
    EventHubPublishOperator(task_id="publish_refused", events=orders, event_hubs_conn_id="eh_refused",
                            wasb_conn_id="wasb_secure", state_container="secure-state", retries=0)
'''

RUN = """
import importlib.util, json, sys
from datetime import datetime
spec = importlib.util.spec_from_file_location("secure_publish", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.dag.test(logical_date=datetime.fromisoformat(sys.argv[2]))
from airflow.models.variable import Variable
from airflow.utils.session import create_session
from sqlalchemy import select
with create_session() as session:
    names = session.scalars(select(Variable.key).where(Variable.key.like("eh_producer_state.secure_publish.%"))).all()
variables = {name: Variable.get(name) for name in names}
states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
with open(sys.argv[3], "w") as fh:
    json.dump({"states": states, "variables": variables}, fh)
"""


@pytest.fixture(scope="module")
def secure_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The local endpoint checking SAS tokens against EH_KEY, and Azurite with one account keyed WASB_KEY."""
    root = tmp_path_factory.mktemp("secure")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AZURITE_ACCOUNTS", f"{ACCOUNT}:{WASB_KEY}")
        azurite = AzuriteProcess(root / "azurite").start()
    eh = EmulatorProcess(root / "eh", extra_args=["--require-auth", "--fsync", "never"], key_name="sender", key=EH_KEY)
    try:
        eh.start()
        blob = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={WASB_KEY};"
                f"BlobEndpoint=http://127.0.0.1:{azurite.port}/{ACCOUNT};")
        yield {"eh": eh, "azurite": azurite, "blob": blob, "logs": [root / "azurite" / "azurite.log", eh.log_path]}
    finally:
        eh.stop()
        azurite.stop()


def haystacks(airflow_home: Path, run: subprocess.CompletedProcess[str], result: dict[str, Any], blob: str) -> dict[str, str]:
    """Everything a secret could leak into, by name: the run's output and log files, XComs, the whole
    metadata DB file, state blobs and (decrypted) Variables."""
    found = {"stdout": run.stdout, "stderr": run.stderr}
    for path in (airflow_home / "logs").rglob("*") if (airflow_home / "logs").exists() else []:
        if path.is_file():
            found[f"log file {path}"] = path.read_text(errors="replace")
    db = airflow_home / "airflow.db"
    with sqlite3.connect(db) as conn:
        rows = conn.execute("select task_id, value from xcom where dag_id = 'secure_publish'").fetchall()
    found["xcom"] = json.dumps([[task, value if isinstance(value, str) else bytes(value).decode(errors="replace")]
                                for task, value in rows])
    found["metadata DB file"] = db.read_bytes().decode("latin-1")
    container = BlobServiceClient.from_connection_string(blob).get_container_client("secure-state")
    found["state blobs"] = json.dumps({b.name: container.download_blob(b.name).readall().decode() for b in container.list_blobs()})
    found["variables"] = json.dumps(result["variables"])
    return found


def test_secrets_appear_in_no_log_xcom_state_or_metadata_of_a_publish_run(
    secure_stack: dict[str, Any], tmp_path: Path
) -> None:
    eh: EmulatorProcess = secure_stack["eh"]
    hub = unique_name("secure")
    eh.admin.create_hub(hub, partitions=4)
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "secure_publish.py").write_text(textwrap.dedent(DAG_FILE))
    refused = eh.connection_string(hub).replace(f"SharedAccessKey={EH_KEY}", f"SharedAccessKey={WRONG_EH_KEY}")
    own = dict((
        connection_env("eh_secure", "azure_event_hubs", extra={"connection_string": eh.connection_string(hub)}),
        connection_env("eh_refused", "azure_event_hubs", extra={"connection_string": refused}),
        connection_env("wasb_secure", "wasb", extra={"connection_string": secure_stack["blob"]}),
    ))
    own.update({"PYTHONPATH": str(REPO), "AIRFLOW__CORE__FERNET_KEY": FERNET_KEY})
    # an Airflow home and metadata DB of the run's own: the haystack is this run's, not the session's DB
    home = tmp_path / "home"
    env = {k: v for k, v in migrated_home(home, dags, own).items() if not k.startswith("AIRFLOW_CONN_") or k in own}
    env["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "INFO"  # each task's publish line is part of the check
    result_path = tmp_path / "result.json"
    run = subprocess.run([sys.executable, "-c", RUN, str(dags / "secure_publish.py"), "2026-06-02T00:00:00+00:00",
                          str(result_path)], capture_output=True, text=True, timeout=300, env=env)
    assert result_path.exists(), failure_report(run.stdout + run.stderr)
    result = json.loads(result_path.read_text())
    assert result["states"] == {"publish_blob": "success", "publish_variable": "success", "publish_refused": "failed"}, \
        failure_report(run.stdout + run.stderr)

    found = haystacks(home, run, result, secure_stack["blob"])
    output = run.stdout + run.stderr
    # the capture is real: each task's publish line and the refused key's failure are in it
    assert output.count("publishing to hub") == 3 and "refused the connection's credential" in output
    # four partitions: their state documents and, for the one committed batch of each, its two ledger records
    assert len(found["state blobs"]) > 100 and len(result["variables"]) == 4 * 3 and "publish_blob" in found["xcom"]
    for what, secret in SECRETS.items():
        leaks = [where for where, text in found.items() if secret in text]
        assert not leaks, f"the {what} leaked into: {leaks}"
    # and the run really published with those secrets: each task's 200 events, once per producer group
    endpoint = EventHubsEndpoint.from_connection_string(eh.connection_string(hub), hub)
    groups: dict[str, int] = {}
    for event in read_hub(endpoint):
        groups[event.properties["eh.group"]] = groups.get(event.properties["eh.group"], 0) + 1
    assert groups == {"secure_publish.publish_blob": 200, "secure_publish.publish_variable": 200}


def test_hooks_register_every_connection_secret_with_the_task_log_masker(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk.log import mask_logs

    from airflow_provider_eh.hooks.blob import BlobStorageHook
    from airflow_provider_eh.hooks.event_hubs import EventHubHook

    key, account_key, secret = f"MaskSas-{MARK}", base64.b64encode(f"MaskAccount-{MARK}".encode()).decode(), f"MaskSecret-{MARK}"
    proxy_password, blob_proxy_password = f"MaskProxy-{MARK}", f"MaskBlobProxy/{MARK}"  # "/" is quoted in a URL
    eh_conn = f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={key};EntityPath=h"
    blob_conn = f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={account_key};EndpointSuffix=core.windows.net"
    for name, value in (
        connection_env("eh_mask", "azure_event_hubs", extra={
            "connection_string": eh_conn, "proxy_host": "proxy.corp", "proxy_port": 3128, "proxy_username": "svc",
            "proxy_password": proxy_password}),
        connection_env("wasb_mask", "wasb", extra={
            "connection_string": blob_conn, "proxy_host": "proxy.corp", "proxy_port": 3128, "proxy_username": "svc",
            "proxy_password": blob_proxy_password}),
        connection_env("wasb_mask_sp", "wasb", host="acct.blob.core.windows.net", login="client-id", password=secret,
                       extra={"tenant_id": "tenant"}),
    ):
        monkeypatch.setenv(name, value)
    quoted = blob_proxy_password.replace("/", "%2F")
    lines = [f"connection string {eh_conn}", f"key {key}", f"storage {blob_conn}", f"account key {account_key}",
             f"client secret {secret}", f"proxy password {proxy_password}",
             f"ProxyError: http://svc:{quoted}@proxy.corp:3128 refused", f"blob proxy {blob_proxy_password}"]
    secrets = (key, account_key, secret, proxy_password, blob_proxy_password, quoted)
    assert all(secret_ in " ".join(lines) for secret_ in secrets)
    EventHubHook("eh_mask").get_endpoint()
    BlobStorageHook("wasb_mask").service_client
    BlobStorageHook("wasb_mask_sp").service_client
    for line in lines:
        shown = mask_logs(None, "info", {"event": line})["event"]  # what a worker's supervisor writes
        assert "***" in shown and not any(s in shown for s in secrets), shown


def listening(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket of a process and its children."""
    procs = [psutil.Process(pid)]
    procs += procs[0].children(recursive=True)
    out = []
    for proc in procs:
        for conn in proc.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                out.append((conn.laddr.ip, conn.laddr.port))
    return out


def test_local_endpoint_and_azurite_listen_on_loopback_only(event_hubs: Any, azurite: Any, secure_stack: dict[str, Any]) -> None:
    for name, pid, at_least in (
        ("local Event Hubs endpoint", event_hubs.pid, 3),  # AMQP, AMQP over WebSockets and admin
        ("Azurite", azurite.pid, 1),
        ("local Event Hubs endpoint with --require-auth", secure_stack["eh"].pid, 2),
        ("Azurite with its own account", secure_stack["azurite"].pid, 1),
    ):
        sockets = listening(pid)
        assert len(sockets) >= at_least, f"{name}: {sockets}"
        assert {ip for ip, _ in sockets} == {"127.0.0.1"}, f"{name} listens beyond loopback: {sockets}"
    assert {event_hubs.port, event_hubs.websocket_port} <= {port for _, port in listening(event_hubs.pid)}
    assert azurite.port in {port for _, port in listening(azurite.pid)}
