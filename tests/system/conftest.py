"""Fixtures of the example DAG tests: a hub, a SQLite file and a data dir of the test's own, and a DAG runner.

The example DAGs run through ``dag.test()`` in a child process (as ``airflow dags test`` does): Airflow
reads the DAGs folder and the connections once per process, and earlier tests may hold ORM state.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.stack import example_env
from tests.conftest import REPO, unique_name
from tests.support.airflow_home import migrated_home
from tests.support.typed_events import registry_endpoint

DAGS = REPO / "dags"

RUN_DAG_TEST = """
import json, sys
from datetime import datetime, timezone
from pathlib import Path

from airflow.dag_processing.dagbag import BundleDagBag
from airflow_provider_eh.testing.dag_test import failed_tasks

dags, dag_id, dates, confs = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
dag = BundleDagBag(dag_folder=str(dags), bundle_path=dags).get_dag(dag_id)
for date in dates:
    for conf in confs:
        logical_date = datetime.fromisoformat(date).replace(tzinfo=timezone.utc) if date else None
        try:
            run = dag.test(logical_date=logical_date, run_conf=conf or None)
        except Exception as exc:
            print("RESULT " + json.dumps({"date": date, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        else:
            result = {"date": date, "state": str(run.state)}
            if str(run.state) != "success":
                result["failed"] = failed_tasks(run)
            print("RESULT " + json.dumps(result), flush=True)
"""


@dataclass(frozen=True)
class ExampleStack:
    """Where one test's example DAG runs publish, load and write."""

    hub: str
    db: Path
    data_dir: Path
    event_hubs: Any
    env: dict[str, str]

    def endpoint(self, hub: str | None = None) -> Any:
        from airflow_provider_eh.client.endpoint import EventHubsEndpoint

        return EventHubsEndpoint.from_connection_string(self.event_hubs.connection_string(), hub or self.hub)

    def run(self, dag_id: str, dates: list[str | None], *confs: dict[str, Any],
            timeout: float = 1200) -> tuple[list[dict[str, Any]], subprocess.CompletedProcess]:
        """``dag.test()`` per logical date and conf, in order, in one child process; the results and the process.

        A result is ``{"date", "state"}``, or ``{"date", "error"}`` when ``dag.test()`` raised.
        """
        proc = subprocess.run(
            [sys.executable, "-c", RUN_DAG_TEST, str(DAGS), dag_id, json.dumps(dates), json.dumps(list(confs) or [{}])],
            capture_output=True, text=True, timeout=timeout, env=self.env, cwd=REPO,
        )
        results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        return results, proc


def explain(results: list[dict[str, Any]], proc: subprocess.CompletedProcess) -> str:
    """For an assertion message: each run's outcome, then why the failed ones failed (tasks, errors, log tail)."""
    from airflow_provider_eh.testing.dag_test import failure_report

    failed = [task for r in results for task in r.get("failed", [])]
    outcomes = ", ".join(f"{r['date']}: {r.get('state') or r.get('error')}" for r in results) or "no run reported"
    return f"runs: {outcomes} (exit {proc.returncode})\n" + failure_report(proc.stdout + proc.stderr, failed)


def order_event_keys(events: list[Any]) -> Counter:
    """How often each order event ``(order_id, step)`` is in the hub."""
    return Counter((e.properties["order_id"], int(e.properties["step"])) for e in events)


@pytest.fixture(scope="module")
def example_stack(azurite: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleStack]:
    """A 2-partition hub with the ``analytics`` and ``lakehouse`` consumer groups, a SQLite file and a data dir; env for the DAGs.

    One per test module: a module's tests follow one hub through several runs. The hub is on an
    endpoint of the module's own that serves a Schema Registry (HTTPS with a private CA, token auth,
    the schema group ``orders``), as the example pipeline publishes Avro; the session's endpoint
    serves none. The runs get an Airflow home and metadata DB of their own, migrated here, as a new
    deployment's: the test process's shared DB holds what other test files left (DAG bundles, DAGs,
    assets), and an asset the example DAGs declare, registered there earlier under another data dir,
    is inactive for these runs.
    """
    tmp_path = tmp_path_factory.mktemp("example")
    with registry_endpoint(tmp_path / "endpoint", {"orders": ("Avro", "Backward")}) as (event_hubs, certificates):
        hub = unique_name("orders")
        event_hubs.admin.create_hub(hub, partitions=2, consumer_groups=["analytics", "lakehouse", "spark-analytics"])
        db = tmp_path / "example.db"
        data_dir = tmp_path / "data"
        env = migrated_home(tmp_path / "airflow", DAGS, example_env(
            db, data_dir, event_hubs=event_hubs.connection_string(), blob=azurite.connection_string, spark_master="local[2]",
            schema_registry=(event_hubs.registry_namespace, certificates.ca),
        ))
        yield ExampleStack(hub=hub, db=db, data_dir=data_dir, event_hubs=event_hubs, env=env)
