"""``events=upstream.output`` through Airflow: the edge is drawn when the DAG is defined, the upstream
runs first, and its events, read back from the hub, arrive as the upstream returned them (Airflow
resolves an upstream output as a native value and does not render the strings in it).

``dag.test()`` runs in a fresh process, on a DAGs folder of the test's own (Airflow runs DAGs from a bundle).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from publish_kit import REPO

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub
from airflow_provider_eh.testing.dag_test import failure_report

RUN_DAG_TEST = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("publish_upstream", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.dag.test()
tis = {ti.task_id: ti for ti in run.get_task_instances()}
print(json.dumps({
    "upstream_of_publish": sorted(module.dag.get_task("publish").upstream_task_ids),
    "states": {task_id: str(ti.state) for task_id, ti in tis.items()},
    "upstream_ended_before_publish_started": tis["todays_orders"].end_date <= tis["publish"].start_date,
}))
"""

DAG_FILE = '''
import os
from datetime import datetime, timezone

from airflow.sdk import DAG, task

from airflow_provider_eh.operators.publish import EventHubPublishOperator

with DAG(dag_id="publish_upstream", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc)) as dag:

    @task
    def todays_orders():
        """Bodies that look like Jinja: an upstream output is a native value, never rendered again."""
        return [{"body": f"order {i}: {{{{ ds }}}} {{% raw %}} {{# note #}}\\n", "partition_key": f"c-{i % 7}"} for i in range(30)]

    EventHubPublishOperator(
        task_id="publish", events=todays_orders(), state_container=os.environ["EH_STATE_CONTAINER"],
    )
'''


def test_events_from_an_upstream_output_are_published_after_it_ran_and_unrendered(
    airflow_db: Path, connections: dict[str, str], container: str, event_hubs: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "publish_upstream.py").write_text(textwrap.dedent(DAG_FILE))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(dags))
    monkeypatch.setenv("EH_STATE_CONTAINER", container)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-c", RUN_DAG_TEST, str(dags / "publish_upstream.py")],
                         capture_output=True, text=True, timeout=480, env=env)
    assert run.returncode == 0, failure_report(run.stdout + run.stderr)
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report == {
        "upstream_of_publish": ["todays_orders"],
        "states": {"todays_orders": "success", "publish": "success"},
        "upstream_ended_before_publish_started": True,
    }, failure_report(run.stdout + run.stderr)

    hub = connections["hub"]
    bodies = sorted(e.body.decode() for e in read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)))
    assert bodies == sorted(f"order {i}: {{{{ ds }}}} {{% raw %}} {{# note #}}\n" for i in range(30))
