"""EventHubPublishOperator through Airflow: ``dag.test()`` in a fresh process (Airflow 3.3 runs DAGs
from a bundle, so the DAG file is written to a DAGs folder of the test's own); re-runs, new intervals
and a worker killed mid-send then re-run publish each event once, with both state backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from publish_kit import REPO

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.testing.crash import ENV as CRASH_ENV
from airflow_provider_eh.client.readback import read_hub
from airflow_provider_eh.testing.dag_test import failure_report

RUN_DAG_TEST = """
import importlib.util, json, sys
from datetime import datetime, timezone
spec = importlib.util.spec_from_file_location("publish_orders", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.dag.test(logical_date=datetime.fromisoformat(sys.argv[2]))
ti = run.get_task_instance("publish")
print(json.dumps({"state": str(run.state), "ti": str(ti.state)}))
"""

DAG_FILE = '''
import os
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.operators.publish import EventHubPublishOperator


def orders(context):
    """The day's orders: 1600 events of ~3 KB keyed by customer, deterministic for the interval."""
    day = context["data_interval_start"].date().isoformat()
    return [
        {"body": {"id": f"{day}-{i}", "pad": "x" * 3000}, "partition_key": f"customer-{i % 97}", "properties": {"day": day}}
        for i in range(1600)
    ]


with DAG(dag_id="publish_orders", schedule="@daily", start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False) as dag:
    EventHubPublishOperator(
        task_id="publish",
        events=orders,
        state_backend="{{ var.value.get('eh_backend', '') }}" if False else os.environ["EH_STATE_BACKEND"],
        state_container=os.environ.get("EH_STATE_CONTAINER") or None,
        claim_timeout=30,
    )
'''


def run_day(dags: Path, day: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = os.environ.copy()
    env["PYTHONPATH"] = str(REPO)
    env.pop(CRASH_ENV, None)
    if crash_at:  # armed in every Python process it starts, by a test-side sitecustomize
        env[CRASH_ENV] = crash_at
        env["PYTHONPATH"] += os.pathsep + str(REPO / "tests" / "support" / "crash_site")
    run = subprocess.run([sys.executable, "-c", RUN_DAG_TEST, str(dags / "publish_orders.py"), day],
                         capture_output=True, text=True, timeout=480, env=env)
    if os.environ.get("EH_DEBUG_DIR"):
        with open(os.path.join(os.environ["EH_DEBUG_DIR"], f"{day[:10]}-{crash_at}.log"), "a") as fh:
            fh.write(run.stdout + run.stderr)
    return run


def write_dag(tmp_path: Path, monkeypatch: Any, backend: str, container: str | None) -> Path:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "publish_orders.py").write_text(textwrap.dedent(DAG_FILE))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    monkeypatch.setenv("EH_STATE_BACKEND", backend)
    if container:
        monkeypatch.setenv("EH_STATE_CONTAINER", container)
    return dags


def day_counts(event_hubs: Any, hub: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)):
        key = json.loads(e.body)["id"]
        counts[key] = counts.get(key, 0) + 1
    return counts


def assert_success(run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 0, failure_report(run.stdout + run.stderr)
    # the result line; a client's closing log from another thread may be written into it, after the object
    result = [x for x in run.stdout.splitlines() if x.startswith('{"state": ')]
    assert result and json.JSONDecoder().raw_decode(result[-1])[0] == {"state": "success", "ti": "success"}, \
        failure_report(run.stdout + run.stderr)


def test_rerun_of_same_interval_through_dag_test_publishes_once_with_blob_state(
    airflow_db: Path, connections: dict[str, str], container: str, azurite: Any, event_hubs: Any, tmp_path: Path,
    monkeypatch: Any,
) -> None:
    dags = write_dag(tmp_path, monkeypatch, "blob", container)
    assert_success(run_day(dags, "2026-03-01T00:00:00+00:00"))
    rerun = run_day(dags, "2026-03-01T00:00:00+00:00")
    assert_success(rerun)
    assert "already committed" in rerun.stdout + rerun.stderr
    counts = day_counts(event_hubs, connections["hub"])
    assert len(counts) == 1600 and set(counts.values()) == {1}
    assert all(k.startswith("2026-02-28") for k in counts)
    # each partition's ledger names the task instance that published the batch
    from azure.storage.blob import ContainerClient

    blobs = ContainerClient.from_connection_string(azurite.connection_string, container)
    origins = [  # the ledger's history records, one per committed batch
        json.loads(blobs.download_blob(blob.name).readall())["origin"]
        for blob in blobs.list_blobs(name_starts_with="_ledger/") if "/history/" in blob.name
    ]
    assert len(origins) == 4  # one batch on each partition of the hub
    assert {json.dumps(o, sort_keys=True) for o in origins} == {json.dumps(
        {"dag_id": "publish_orders", "task_id": "publish", "run_id": origins[0]["run_id"], "map_index": -1, "try_number": 1},
        sort_keys=True,
    )}
    assert origins[0]["run_id"].startswith("manual__")  # the dag.test() run that published the day


def test_worker_killed_mid_send_then_rerun_publishes_once_with_variable_state(
    airflow_db: Path, connections: dict[str, str], event_hubs: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    dags = write_dag(tmp_path, monkeypatch, "variable", None)
    # every dag.test() process must decrypt the Variables the previous one wrote
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", "t8tKM1Dc9vVqJ7q0d5qf3kE8u2m4b6m0Zr3xLw9yQ1A=")
    crashed = run_day(dags, "2026-04-01T00:00:00+00:00", crash_at="mid_send:1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    partial = day_counts(event_hubs, connections["hub"])
    assert 0 < len(partial) < 1600
    retry = run_day(dags, "2026-04-01T00:00:00+00:00")
    assert_success(retry)
    assert "recovery (pending) found" in retry.stdout + retry.stderr
    rerun = run_day(dags, "2026-04-01T00:00:00+00:00")
    assert_success(rerun)
    assert "already committed" in rerun.stdout + rerun.stderr
    counts = day_counts(event_hubs, connections["hub"])
    assert len(counts) == 1600 and set(counts.values()) == {1}
