"""Two ``dag.test()`` runs of one DAG and one logical date, the first paused in the middle of its send.

As a user would see it on two workers: each run has an Airflow home and metadata DB of its own; both
publish through ``EventHubPublishOperator`` with the blob state backend (one container,
``lease_seconds=15``) to one partition. The first run's task stops itself with SIGSTOP between its
deadline check and its second SDK batch (``before_send:2``, the batch the claim's deadline cannot
stop); the second run waits out the lease, claims, recovers by read-back and commits; the first is
resumed. The hub's fencing refuses the resumed send: its task fails, the second run succeeded, and a
plain consumer counts every event once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

from publish_kit import REPO
from test_publish_operator_dag import RUN_DAG_TEST  # dag.test() of a DAG file's task 'publish'

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub
from airflow_provider_eh.testing.crash import ENV as CRASH_ENV, PAUSE_ENV
from airflow_provider_eh.testing.dag_test import failure_report
from tests.support.paused import resume, wait_stopped

EVENTS = 8000

DAG_FILE = f'''
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.operators.publish import EventHubPublishOperator


def orders(context):
    """The day's orders, ~4 MB on partition 0: several SDK batches."""
    day = context["data_interval_start"].date().isoformat()
    return [{{"body": {{"id": f"{{day}}-{{i}}", "pad": "x" * 450}}, "partition_id": "0"}} for i in range({EVENTS})]


with DAG(dag_id="stalled_orders", schedule="@daily", start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
         catchup=False) as dag:
    EventHubPublishOperator(task_id="publish", events=orders, state_backend="blob",
                            state_container="{{{{ var.value.eh_state_container }}}}", lease_seconds=15,
                            claim_timeout=90)
'''


DAY = "2026-06-01T00:00:00+00:00"


def _start(dag_file: Path, home: Path, container: str, pause_at: str | None = None) -> subprocess.Popen[str]:
    """``dag.test()`` of the day in a child process with its own Airflow home and DB."""
    env = {k: v for k, v in os.environ.items() if k not in (CRASH_ENV, PAUSE_ENV)}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dag_file.parent),
        "AIRFLOW_VAR_EH_STATE_CONTAINER": container,
        "PYTHONPATH": str(REPO),
    })
    if pause_at:  # armed in the task's process by a test-side sitecustomize
        env[PAUSE_ENV] = pause_at
        env["PYTHONPATH"] += os.pathsep + str(REPO / "tests" / "support" / "crash_site")
    return subprocess.Popen([sys.executable, "-c", RUN_DAG_TEST, str(dag_file), DAY], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _result(out: str, err: str) -> dict[str, Any]:
    try:
        # the result line; a client's closing log from another thread may be written into it, after the object
        line = [x for x in out.splitlines() if x.startswith('{"state": ')][-1]
        return json.JSONDecoder().raw_decode(line)[0]
    except (IndexError, ValueError):
        raise AssertionError("no result\n" + failure_report(out + err)) from None


def test_a_dag_run_paused_mid_send_while_another_run_of_the_day_takes_over_lands_each_event_once(
    airflow_db: Path, connections: dict[str, str], container: str, event_hubs: Any, tmp_path: Path,
) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    dag_file = dags / "stalled_orders.py"
    dag_file.write_text(textwrap.dedent(DAG_FILE))
    homes = [tmp_path / "worker-1", tmp_path / "worker-2"]
    for home in homes:  # two workers' metadata DBs: copies of the session's freshly migrated one
        home.mkdir()
        shutil.copy(airflow_db / "airflow.db", home / "airflow.db")

    first = _start(dag_file, homes[0], container, pause_at="before_send:2")
    try:
        wait_stopped(first.pid, timeout=240)
        second = _start(dag_file, homes[1], container)
        out2, err2 = second.communicate(timeout=400)
    finally:
        resume(first.pid)
    out1, err1 = first.communicate(timeout=240)

    assert _result(out2, err2) == {"state": "success", "ti": "success"}, failure_report(out2 + err2)
    said2 = out2 + err2
    assert "recovered" in said2 and "fenced by the hub" in said2, said2[-3000:]
    assert _result(out1, err1)["ti"] == "failed", failure_report(out1 + err1)
    assert "fenced at the hub" in out1 + err1, (out1 + err1)[-3000:]
    hub = connections["hub"]
    read = read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub))
    ids = Counter(json.loads(e.body)["id"] for e in read)
    assert len(ids) == EVENTS and set(ids.values()) == {1}, \
        f"{len(read)} events, {len(ids)} distinct, {sum(n - 1 for n in ids.values())} twice"
