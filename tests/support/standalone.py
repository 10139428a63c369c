"""``airflow standalone`` on 127.0.0.1 with a home and ports of its own, and a REST client on it.

Used by the scheduler-path test and the scheduler soak. Scheduled runs are off
(``use_job_schedule``), so the only runs are those triggered or backfilled; everything started runs
in a process group of its own, which :meth:`AirflowStandalone.stop` ends (standalone, its components
and their task processes), and nothing else.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from eventhubs_local.ports import free_port


class StandaloneError(RuntimeError):
    """Standalone exited, did not answer, or a run failed; the message ends with its log's tail."""


def standalone_env(
    home: Path, port: int, base: dict[str, str] | None = None, metadata_db: str | None = None, python: str | None = None,
) -> dict[str, str]:
    """``base`` (default: this process's environment) plus what an isolated standalone needs.

    The metadata DB is ``metadata_db`` (an SQLAlchemy URL, e.g. a Postgres database from
    :func:`tests.support.databases.postgres_database`) or else SQLite in ``home`` with a
    60 s lock timeout (a backfill's inserts can wait on the scheduler's transactions longer than
    SQLite's default 5 s on a loaded machine). SQLite suits one process writing at a time: a second
    writer beside the scheduler (``airflow backfill create``, the CLI) can still fail at once with
    "database is locked" when two transactions each wait for the other's lock, which no timeout
    helps; give those tests Postgres, as a deployment would have. The log
    servers of the scheduler and the triggerer, which Airflow binds on all interfaces, get free ports
    instead of 8793/8794 so that two instances do not collide. ``python`` is the interpreter of the
    environment Airflow runs from (default: this one's), whose ``bin`` comes first on ``PATH``.
    """
    env = dict(os.environ if base is None else base)
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)
    env.update({
        "PATH": f"{Path(python or sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # standalone runs `airflow ...`
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_db or f"sqlite:///{home / 'airflow.db'}?timeout=60",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__CORE__PARALLELISM": "3",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    })
    return env


class AirflowApi:
    """A REST client (``/api/v2``) on an Airflow API server at ``base``, and the waits of the tests that use it.

    Used on ``airflow standalone`` (:class:`AirflowStandalone`) and on the separate-process deployment
    (:mod:`tests.support.deployment`).

    :param base: the API server's URL, ``http://host:port``.
    :param home: the ``AIRFLOW_HOME`` of its components (where the task logs are).
    :param credentials: the simple auth manager's user and password; ``None`` where every user is
        admin (``simple_auth_manager_all_admins``) and a token needs no login.
    """

    def __init__(self, base: str, home: Path, credentials: tuple[str, str] | None = None):
        self.base, self.home, self.credentials = base, home, credentials
        self.client: httpx.Client | None = None

    def login(self) -> None:
        if self.credentials is None:
            response = httpx.get(f"{self.base}/auth/token", timeout=10)
        else:
            user, password = self.credentials
            response = httpx.post(f"{self.base}/auth/token", json={"username": user, "password": password}, timeout=10)
        token = response.json()["access_token"]
        if self.client is not None:
            self.client.close()
        self.client = httpx.Client(base_url=f"{self.base}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self._request("GET", path, params=params)

    def post(self, path: str, json: Any) -> httpx.Response:
        return self._request("POST", path, json=json)

    def patch(self, path: str, json: Any) -> httpx.Response:
        return self._request("PATCH", path, json=json)

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One REST call, made again after a new login when the token expired (401)."""
        response = self._api().request(method, path, **kwargs)
        if response.status_code == 401:
            self.login()
            response = self._api().request(method, path, **kwargs)
        return response

    def unpause(self, *dag_ids: str) -> None:
        """Unpause the DAGs (parsed already: :meth:`wait_for_dag`), as the UI's toggle does."""
        for dag_id in dag_ids:
            self.patch(f"/dags/{dag_id}", json={"is_paused": False}).raise_for_status()

    def check_alive(self) -> None:
        """Raise when what serves the API is gone (nothing to check here; subclasses know their processes)."""

    def tail(self, chars: int = 5000) -> str:
        """The end of the server's log, for error messages ("" here)."""
        return ""

    def _api(self) -> httpx.Client:
        """The REST client that :meth:`login` made."""
        if self.client is None:
            raise StandaloneError("no REST client: call start() (or login()) first")
        return self.client

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def wait_for_dag(self, dag_id: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.get(f"/dags/{dag_id}").status_code != 200:
            self.check_alive()
            if time.monotonic() > deadline:
                raise StandaloneError(f"{dag_id} was not parsed in {timeout} s:\n{self.tail()}")
            time.sleep(2)

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        response = self.get(f"/dags/{dag_id}/dagRuns", limit=1000)
        response.raise_for_status()
        return response.json()["dag_runs"]

    def wait_for_runs(self, dag_id: str, count: int, timeout: float) -> list[dict[str, Any]]:
        """Wait until ``count`` runs exist and all of them have finished; a failed run raises."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            runs = self.runs(dag_id)
            failed = [r["dag_run_id"] for r in runs if r["state"] == "failed"]
            if failed:
                raise StandaloneError(f"runs failed: {failed}\n{self.failure_report(dag_id, failed)}\n"
                                      f"the server's log:\n{self.tail(2000)}")
            if len(runs) >= count and all(r["state"] == "success" for r in runs):
                return runs
            if time.monotonic() > deadline:
                raise StandaloneError(f"runs not done in {timeout} s: {[(r['dag_run_id'], r['state']) for r in runs]}")
            time.sleep(3)

    def failure_report(self, dag_id: str, run_ids: list[str], tail: int = 40) -> str:
        """Each failed task of these runs: its state, its error, and the tail of its log file."""
        from airflow_provider_eh.testing.dag_test import FAILED_STATES, log_tail

        parts = []
        for run_id in run_ids:
            for ti in self.task_instances(dag_id, run_id):
                if ti["state"] not in FAILED_STATES:
                    continue
                logs = sorted((self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={ti['task_id']}")
                              .glob("**/attempt=*.log"))
                parts.append(f"task {ti['task_id']} of {run_id}: {ti['state']} (try {ti.get('try_number')})")
                parts.extend(log_tail(path, tail) for path in logs[-1:])
        return "\n".join(parts) or "no failed task instance found"

    def where_tasks_are(self, dag_id: str, runs: list[dict[str, Any]]) -> str:
        """A line per task instance of these runs of ``dag_id``: run, task, state, try, worker, when queued
        and started (what a wait that timed out reports)."""
        return "\n".join(
            f"{run['dag_run_id']} run={run['state']} {ti['task_id']}={ti['state']} try={ti['try_number']} "
            f"host={ti.get('hostname')} queued={ti.get('queued_when')} started={ti.get('start_date')}"
            for run in runs for ti in self.task_instances(dag_id, run["dag_run_id"])
        )

    def wait_for_backfills(self, dag_ids: Sequence[str], count: int, timeout: float) -> dict[str, list[dict[str, Any]]]:
        """Wait until each DAG has ``count`` backfills, all completed, and every run of it succeeded; its
        runs. A failed run raises at once with its failed tasks' logs; a timeout with where every task
        instance is."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            runs, done = {}, []
            for dag_id in dag_ids:
                runs[dag_id] = self.runs(dag_id)
                failed = [r["dag_run_id"] for r in runs[dag_id] if r["state"] == "failed"]
                if failed:
                    raise StandaloneError(f"runs of {dag_id} failed: {failed}\n{self.failure_report(dag_id, failed)}")
                response = self.get("/backfills", dag_id=dag_id)
                response.raise_for_status()
                backfills = response.json()["backfills"]
                done.append(len(backfills) == count and all(b["completed_at"] for b in backfills)
                            and all(r["state"] == "success" for r in runs[dag_id]))
            if all(done):
                return runs
            if time.monotonic() > deadline:
                where = "\n".join(self.where_tasks_are(dag_id, dag_runs) for dag_id, dag_runs in runs.items())
                raise StandaloneError(f"backfills not done in {timeout:.0f} s:\n{where}\nthe log:\n{self.tail(3000)}")
            time.sleep(3)

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        response = self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        response.raise_for_status()
        return response.json()["task_instances"]


class AirflowStandalone(AirflowApi):
    """``airflow standalone`` started in a process group of its own, and a REST client (``/api/v2``) on it.

    :param env: its environment (:func:`standalone_env`).
    :param port: the API server's port.
    :param log: the file its output goes to; its folder is the working directory.
    :param python: the interpreter of the environment Airflow runs from (default: this one).
    """

    def __init__(self, env: dict[str, str], port: int, log: Path, python: str | None = None):
        super().__init__(f"http://127.0.0.1:{port}", Path(env["AIRFLOW_HOME"]))
        self.env, self.port, self.log = env, port, log
        self.python = python or sys.executable
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 300) -> None:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [self.python, "-m", "airflow", "standalone"], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.log.parent,
            )
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            if time.monotonic() > deadline:
                raise StandaloneError(f"the API server did not answer in {timeout} s:\n{self.tail()}")
            try:
                self.login()
                return
            except (httpx.HTTPError, ValueError, KeyError):
                time.sleep(2)

    def check_alive(self) -> None:
        if self.proc is None:
            raise StandaloneError("airflow standalone was not started: call start() first")
        if self.proc.poll() is not None:
            raise StandaloneError(f"airflow standalone exited with code {self.proc.returncode}:\n{self.tail()}")

    def stop(self) -> None:
        self.close()
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the group started above: standalone, its components, tasks
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        try:  # components or task processes left behind in the group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def tail(self, chars: int = 5000) -> str:
        return self.log.read_text(errors="replace")[-chars:]
