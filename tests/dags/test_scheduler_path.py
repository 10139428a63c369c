"""The daily pipeline the way people run it: ``airflow standalone``, a REST-triggered run, a backfill.

``airflow standalone`` (API server, scheduler, DAG processor, triggerer, LocalExecutor) runs on
127.0.0.1 with an Airflow home and ports of its own. A run is triggered through the REST API with
``conf``; then ``airflow backfill create`` schedules two days, one of which the REST run already
published. The hub must then hold each of the two days' events exactly once. Scheduled runs are
off (``use_job_schedule``) so that catchup does not add runs of its own; only the processes this
test started are stopped (their process group).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.dags.conftest import ExampleStack, order_event_keys

DAG_ID = "eh_daily_orders"
ROWS = 6
REST_LOGICAL_DATE = "2026-11-03T12:00:00Z"  # a manual run processes the last full day before it: 2026-11-02
BACKFILL = ("2026-11-02", "2026-11-03")  # two runs: day 2026-11-02 (again) and day 2026-11-03
DAYS = ["2026-11-02", "2026-11-03"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Airflow:
    """A standalone Airflow started by this test, and a REST client on it."""

    def __init__(self, env: dict[str, str], port: int, log: Path):
        self.env, self.port, self.log = env, port, log
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        self.client: httpx.Client | None = None

    def start(self, timeout: float = 240) -> None:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "airflow", "standalone"], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"airflow standalone exited:\n{self.tail()}"
            assert time.monotonic() < deadline, f"the API server did not answer in {timeout} s:\n{self.tail()}"
            try:
                token = httpx.get(f"{self.base}/auth/token", timeout=5).json()["access_token"]
                break
            except (httpx.HTTPError, ValueError, KeyError):
                time.sleep(2)
        self.client = httpx.Client(base_url=f"{self.base}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the group started above: standalone, its components, tasks
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc is not None:
            try:  # components or task processes left behind in the group
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def wait_for_dag(self, dag_id: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while self.client.get(f"/dags/{dag_id}").status_code != 200:
            assert time.monotonic() < deadline, f"{dag_id} was not parsed in {timeout} s:\n{self.tail()}"
            time.sleep(2)

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        response = self.client.get(f"/dags/{dag_id}/dagRuns", params={"limit": 100})
        response.raise_for_status()
        return response.json()["dag_runs"]

    def wait_for_runs(self, dag_id: str, count: int, timeout: float) -> list[dict[str, Any]]:
        """Wait until ``count`` runs exist and all of them have finished; fail on a failed run."""
        deadline = time.monotonic() + timeout
        while True:
            runs = self.runs(dag_id)
            failed = [r["dag_run_id"] for r in runs if r["state"] == "failed"]
            assert not failed, f"runs failed: {failed}\n{self.tail()}"
            if len(runs) >= count and all(r["state"] == "success" for r in runs):
                return runs
            assert time.monotonic() < deadline, f"runs not done in {timeout} s: {[(r['dag_run_id'], r['state']) for r in runs]}"
            time.sleep(3)


@pytest.fixture
def airflow(example_stack: ExampleStack, tmp_path: Path) -> Iterator[Airflow]:
    port = free_port()
    home = tmp_path / "airflow-home"
    home.mkdir()
    env = {k: v for k, v in example_stack.env.items() if k != "AIRFLOW__CORE__UNIT_TEST_MODE"}
    env.update({
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # standalone runs `airflow ...`
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__CORE__PARALLELISM": "3",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    })
    instance = Airflow(env, port, tmp_path / "standalone.log")
    try:
        instance.start()
        yield instance
    finally:
        instance.stop()


def test_rest_triggered_run_and_backfill_create_publish_each_event_once(
    example_stack: ExampleStack, airflow: Airflow
) -> None:
    import pyarrow.parquet as pq

    from airflow_provider_eh.testing.readback import read_hub

    airflow.wait_for_dag(DAG_ID)
    conf = {"hub": example_stack.hub, "rows": ROWS}

    refused = airflow.client.post(f"/dags/{DAG_ID}/dagRuns", json={"logical_date": REST_LOGICAL_DATE, "conf": {**conf, "rows": 0}})
    assert refused.status_code == 400
    assert "Invalid input for param rows: 0 is less than the minimum of 1" in refused.text

    triggered = airflow.client.post(f"/dags/{DAG_ID}/dagRuns", json={"logical_date": REST_LOGICAL_DATE, "conf": conf})
    assert triggered.status_code == 200, triggered.text
    (run,) = airflow.wait_for_runs(DAG_ID, 1, timeout=300)
    assert run["conf"] == conf and run["data_interval_start"].startswith(DAYS[0])
    after_rest = order_event_keys(read_hub(example_stack.endpoint()))

    backfill = subprocess.run(
        [sys.executable, "-m", "airflow", "backfill", "create", "--dag-id", DAG_ID, "--from-date", BACKFILL[0],
         "--to-date", BACKFILL[1], "--max-active-runs", "1", "--dag-run-conf", json.dumps(conf)],
        env=airflow.env, capture_output=True, text=True, timeout=120,
    )
    assert backfill.returncode == 0, backfill.stderr[-3000:]
    runs = airflow.wait_for_runs(DAG_ID, 3, timeout=420)
    backfilled = sorted(r["data_interval_start"][:10] for r in runs if r["run_type"] == "backfill")
    assert backfilled == DAYS

    generated = Counter(
        (row["order_id"], row["step"])
        for day in DAYS for row in pq.read_table(example_stack.data_dir / "orders" / f"ds={day}").to_pylist()
    )
    in_hub = order_event_keys(read_hub(example_stack.endpoint()))
    assert in_hub == generated  # two days, each event once, although day one ran twice
    assert {key for key in after_rest} == {key for key in generated if key[0].startswith("20261102")}
