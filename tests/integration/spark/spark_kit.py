"""Helpers of the Spark publishing tests: the test's hub and container, outputs written by Spark,
in-process and subprocess publishes, and reading the hub back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import files
from pathlib import Path
from typing import Any

from azure.storage.blob import ContainerClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, PartitionResult, derive_batch_id
from airflow_provider_eh.testing.crash import ENV as CRASH_ENV
from airflow_provider_eh.spark.job import SparkPublishJob, SparkSource
from airflow_provider_eh.spark.mapping import RowMapping
from airflow_provider_eh.client.readback import ReadEvent, read_hub

RUNNER = Path(__file__).with_name("spark_runner.py")
DAG_TEST_RUNNER = Path(__file__).with_name("dag_test_runner.py")

# Small sessions on a shared 2-core machine: no UI, 4 shuffle partitions, and a JVM that spends its
# short life running rather than compiling (C1 only) and collecting (serial GC).
TEST_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
REPO = Path(__file__).resolve().parents[3]

# What the tests' outputs look like: an order id, a customer (the key), a region (a property), a padding.
ORDERS_SQL = (
    "id", "concat('customer-', cast(id % 1009 as string)) as customer", "cast(id % 7 as int) as region",
    "concat('order-', cast(id as string)) as order_id",
)


def start_session() -> tuple[Any, bool]:
    """The tests' ``local[2]`` session (the running one, if any) and whether it was started here (then stop it)."""
    import logging

    from airflow_provider_eh.spark.session import SparkSettings, get_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    logging.getLogger("py4j").setLevel(logging.WARNING)  # it logs from __del__ after pytest closed its streams
    session, owned = get_session(SparkSettings(master="local[2]", conf=TEST_CONF))
    session.sparkContext.setLogLevel("ERROR")
    return session, owned


def write_orders(spark: Any, path: str, rows: int, *, pad: int = 0, files: int = 4, start: int = 0) -> str:
    """A Spark step writing ``rows`` orders as parquet (in ``files`` files, shuffled so order is not given)."""
    cols = list(ORDERS_SQL) + ([f"repeat('x', {pad}) as pad"] if pad else [])
    df = spark.range(start, start + rows).selectExpr(*cols)
    df.repartition(files).write.mode("overwrite").parquet(path)
    return path


def batch(name: str, generation: int = 0) -> str:
    return derive_batch_id("g", "spark_dag", name, logical_date="2026-05-01T00:00:00+00:00", generation=generation)


ORDERS_MAPPING = {"key_column": "customer", "property_columns": ["region"], "order_by": ["id"]}


@dataclass
class SparkSetup:
    """One test's hub and blob container, and ways to publish Spark output into them."""

    event_hubs: Any
    azurite: Any
    hub: str
    container_name: str
    tmp: Path

    @property
    def endpoint(self) -> EventHubsEndpoint:
        return EventHubsEndpoint.from_connection_string(self.event_hubs.connection_string(self.hub), self.hub)

    def publisher(self, group: str = "g", **kwargs: Any) -> IdempotentPublisher:
        container = ContainerClient.from_connection_string(self.azurite.connection_string, self.container_name)
        store = BlobProducerStateStore(container, claim_timeout=kwargs.pop("claim_timeout", 0))
        return IdempotentPublisher(self.endpoint, store, producer_group=group, **kwargs)

    def publish(self, spark: Any, path: str, batch_id: str, mapping: dict[str, Any] | None = None,
                **options: Any) -> dict[str, PartitionResult]:
        """Publish in this process with the tests' session."""
        publisher = self.publisher(claim_timeout=options.pop("claim_timeout", 0), **options.pop("publisher", {}))
        job = SparkPublishJob(spark, publisher, RowMapping(**(mapping or ORDERS_MAPPING)), **options)
        return job.publish(SparkSource(path=path), batch_id)

    def start(self, path: str, batch_id: str, *, crash_at: str | None = None, claim_timeout: float = 0,
              mapping: dict[str, Any] | None = None, blob: str | None = None,
              network: dict[str, Any] | None = None, hold_relay: bool = True,
              publisher: dict[str, Any] | None = None) -> subprocess.Popen[str]:
        """Publish in a child process that owns its SparkSession (``local[2]``), optionally crashing at a point;
        ``blob``: another connection string for its blob storage (through a proxy); ``network``: the hub
        connection's network fields (``transport``, ``custom_endpoint_address``, ...); ``hold_relay``: the job's;
        ``publisher``: more arguments of its ``IdempotentPublisher``."""
        config = {
            "eh": self.event_hubs.connection_string(self.hub), "hub": self.hub, "network": network or {},
            "blob": blob or self.azurite.connection_string, "container": self.container_name, "group": "g",
            "batch_id": batch_id, "path": path, "mapping": mapping or ORDERS_MAPPING, "claim_timeout": claim_timeout,
            "hold_relay": hold_relay, "publisher": publisher or {},
        }
        env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
        env["PYTHONPATH"] = str(REPO)
        if crash_at:  # armed in every Python process it starts, by a test-side sitecustomize
            env[CRASH_ENV] = crash_at
            env["PYTHONPATH"] += os.pathsep + str(REPO / "tests" / "support" / "crash_site")
        fd, config_path = tempfile.mkstemp(prefix="spark-publish-", suffix=".json", dir=self.tmp)
        with os.fdopen(fd, "w") as fh:
            json.dump(config, fh)
        return subprocess.Popen([sys.executable, str(RUNNER), config_path], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read_back(self) -> list[ReadEvent]:
        return read_hub(self.endpoint)

    def ends(self) -> dict[str, int]:
        """Each partition's last service sequence number (-1 when empty)."""
        with self.endpoint.producer() as client:
            return {p: int(client.get_partition_properties(p)["last_enqueued_sequence_number"])
                    for p in client.get_partition_ids()}


def result_of(out: str) -> dict[str, Any]:
    return json.loads(out.strip().splitlines()[-1])


def run_dag_test(dag_file: Path, day: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``dag.test()`` of ``dag_file`` (its task ``publish``) in a child process with ``env`` (default: this one's)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)} if env is None else env
    return subprocess.run([sys.executable, str(DAG_TEST_RUNNER), str(dag_file), day],
                          capture_output=True, text=True, timeout=600, env=env)


def outcome_of(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The runner's RESULT, with ``report``: why the run failed (tasks, errors, output tail) for an assertion message."""
    from airflow_provider_eh.testing.dag_test import failure_report

    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"exit {run.returncode}, no RESULT\n" + failure_report(run.stdout + run.stderr)
    outcome = json.loads(lines[-1][len("RESULT "):])
    outcome["report"] = failure_report(run.stdout + run.stderr, outcome.get("failed"))
    return outcome


def pyspark_only_from(distribution: str, target: Path, *, without: tuple[str, ...] = ()) -> Path:
    """
    A folder to put first on PYTHONPATH: ``pyspark`` as ``distribution`` alone installs it.

    ``pyspark-client`` gives the Spark Connect client without Spark; ``pyspark`` with
    ``without=("jars", "bin", "sbin")`` gives PySpark without a Spark distribution. The files are
    copied, not linked, so that PySpark's own search for its home sees this folder.
    """
    for file in files(distribution) or ():
        parts = file.parts
        if parts[0] != "pyspark" or (len(parts) > 2 and parts[1] in without):
            continue
        dest = target / file
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file.locate(), dest)
    return target


def env_without_spark_or_java(pythonpath: Path) -> dict[str, str]:
    """This environment with ``pythonpath`` first, no SPARK_HOME or JAVA_HOME, and no ``java`` on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "JAVA_HOME", "SPARK_REMOTE")}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep) if d and not Path(d, "java").exists())
    env["PYTHONPATH"] = os.pathsep.join((str(pythonpath), str(REPO)))
    return env
