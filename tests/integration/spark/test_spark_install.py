"""SparkToEventHubOperator where Spark is not fully installed, through ``dag.test()`` in a fresh process.

A master URL without a Spark distribution fails the task with what to install, instead of PySpark
ending the process; a Spark Connect URL publishes with ``pyspark-client`` alone (no Spark, no Java
in the task's environment) against a Connect server started from the installed distribution's jars,
and the settings that server refuses are reported in one warning.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_kit import env_without_spark_or_java, outcome_of, pyspark_only_from, run_dag_test

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub
from tests.support.spark_connect import SparkConnectServer

DAG_FILE = '''
import json
import os
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

with DAG(dag_id="publish_spark_install", schedule="@daily", start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
         catchup=False) as dag:
    SparkToEventHubOperator(
        task_id="publish",
        path=os.environ["EH_OUTPUT"],
        key_column="customer",
        property_columns=["region"],
        order_by=["id"],
        state_container=os.environ["EH_STATE_CONTAINER"],
        spark_conf=json.loads(os.environ["EH_SPARK_CONF"]),
        claim_timeout=30,
    )
'''
DAY = "2026-06-02T00:00:00+00:00"
REFUSED_WARNING = "not applied, the Connect server keeps its own"


@pytest.fixture(scope="module")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A Spark Connect server (``local[2]``) for this module's tests, stopped with its workers after them."""
    with SparkConnectServer(tmp_path_factory.mktemp("spark-connect")) as server:
        yield server


def write_orders_parquet(path: Path, rows: int) -> str:
    """The tests' orders (id, customer, region, order_id) as parquet, written without Spark."""
    ids = list(range(rows))
    path.mkdir(parents=True)
    pq.write_table(pa.table({
        "id": pa.array(ids, pa.int64()),
        "customer": [f"customer-{i % 1009}" for i in ids],
        "region": pa.array([i % 7 for i in ids], pa.int32()),
        "order_id": [f"order-{i}" for i in ids],
    }), path / "part-0.parquet")
    return str(path)


def run_publish(tmp_path: Path, site: Path, spark_conn: dict[str, Any], spark_conf: dict[str, str],
                container: str, rows: int) -> tuple[dict[str, Any], str]:
    """One ``dag.test()`` of the publish in an environment with ``site``'s pyspark, no SPARK_HOME and no Java."""
    (tmp_path / "dags").mkdir()
    dag_file = tmp_path / "dags" / "publish_spark_install.py"
    dag_file.write_text(textwrap.dedent(DAG_FILE))
    env = env_without_spark_or_java(site)
    env.update({
        "AIRFLOW__CORE__DAGS_FOLDER": str(dag_file.parent),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark_conn),
        "EH_OUTPUT": write_orders_parquet(tmp_path / "orders", rows),
        "EH_STATE_CONTAINER": container,
        "EH_SPARK_CONF": json.dumps(spark_conf),
    })
    run = run_dag_test(dag_file, DAY, env)
    log = run.stdout + run.stderr
    assert run.returncode == 0, f"the task process ended (exit {run.returncode}):\n{log[-4000:]}"
    return outcome_of(run), log


@pytest.mark.parametrize(
    ("distribution", "without"),
    [("pyspark-client", ()), ("pyspark", ("jars", "bin", "sbin"))],
    ids=["pyspark-client-alone", "pyspark-without-jars"],
)
def test_master_without_a_spark_distribution_fails_the_task_naming_the_extra_and_never_exits(
    airflow_db: Path, connections: dict[str, str], container: str, tmp_path: Path,
    distribution: str, without: tuple[str, ...],
) -> None:
    site = pyspark_only_from(distribution, tmp_path / "site", without=without)
    outcome, log = run_publish(tmp_path, site, {"conn_type": "spark", "host": "local[2]"}, {}, container, 10)
    assert outcome["ti"] == "failed", log[-4000:]
    assert "Task 'publish': Spark (master local[2]) cannot start in this task: " in log
    assert "pip install 'airflow-provider-eh[spark]'" in log and "host is sc://host:15002" in log
    assert ("only pyspark-client is installed" if distribution == "pyspark-client"
            else "pyspark is installed without its jars and bin/spark-submit, and SPARK_HOME is not set") in log
    assert "Could not find valid SPARK_HOME" not in log and "CONNECT_URL_NOT_SET" not in log
    assert "Task exited" not in log, "the task process was ended instead of failing the task"


def test_spark_connect_publishes_each_row_once_with_pyspark_client_alone_and_reports_refused_settings_once(
    airflow_db: Path, connections: dict[str, str], container: str, event_hubs: Any, tmp_path: Path,
    spark_connect: SparkConnectServer,
) -> None:
    site = pyspark_only_from("pyspark-client", tmp_path / "site")
    conn = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": spark_connect.port}
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "3", "spark.executor.memory": "1g"}
    outcome, log = run_publish(tmp_path, site, conn, conf, container, 2000)
    assert (outcome["state"], outcome["ti"]) == ("success", "success"), log[-4000:] + spark_connect.tail()
    assert f"with Spark (Spark Connect sc://127.0.0.1:{spark_connect.port}/)" in log
    assert sum(v["events"] for v in outcome["xcom"]["publish.return_value"].values()) == 2000

    warnings = [line for line in log.splitlines() if REFUSED_WARNING in line]
    assert len(warnings) == 1, warnings
    assert "keeps its own spark.ui.enabled, spark.executor.memory (cluster or static settings" in warnings[0]
    assert "They belong on the Connect server" in warnings[0]
    assert "CANNOT_MODIFY_CONFIG" not in log and "spark.speculation" not in log

    hub = connections["hub"]
    ids = Counter(json.loads(e.body)["id"]
                  for e in read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)))
    assert len(ids) == 2000 and set(ids.values()) == {1}
