"""Where SparkToEventHubOperator runs Spark, read from the ``spark_default`` connection as the Spark provider reads it."""

from __future__ import annotations

import json

import pytest

from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator, spark_settings


def set_conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_missing_connection_runs_local_with_the_operator_conf() -> None:
    settings = spark_settings("spark_never_defined", {"spark.executor.memory": "2g"})
    assert (settings.master, settings.remote, dict(settings.conf)) == ("local[*]", None, {"spark.executor.memory": "2g"})


def test_master_url_in_host_or_built_from_type_host_and_port(monkeypatch: pytest.MonkeyPatch) -> None:
    set_conn(monkeypatch, "spark_local", conn_type="spark", host="local[2]")
    set_conn(monkeypatch, "spark_standalone", conn_type="spark", host="spark://master", port=7077)
    set_conn(monkeypatch, "spark_k8s", conn_type="spark", host="k8s://https://api.example:443", extra={"namespace": "jobs"})
    assert spark_settings("spark_local").master == "local[2]"
    assert spark_settings("spark_standalone").master == "spark://master:7077"
    k8s = spark_settings("spark_k8s")
    assert k8s.master == "k8s://https://api.example:443" and k8s.conf["spark.kubernetes.namespace"] == "jobs"


def test_yarn_queue_from_extras_and_operator_conf_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    set_conn(monkeypatch, "spark_yarn", conn_type="spark", host="yarn", extra={"queue": "etl"})
    settings = spark_settings("spark_yarn", {"spark.yarn.queue": "urgent", "spark.executor.cores": "4"})
    assert settings.master == "yarn" and dict(settings.conf) == {"spark.yarn.queue": "urgent", "spark.executor.cores": "4"}


def test_spark_connect_connection_gives_a_remote_url(monkeypatch: pytest.MonkeyPatch) -> None:
    set_conn(monkeypatch, "spark_remote", conn_type="spark_connect", host="connect.example", port=15002, password="tok")
    settings = spark_settings("spark_remote")
    assert settings.remote == "sc://connect.example:15002/;token=tok"
    assert settings.describe() == "Spark Connect sc://connect.example:15002/"


def test_cluster_deploy_mode_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    set_conn(monkeypatch, "spark_cluster", conn_type="spark", host="yarn", extra={"deploy-mode": "cluster"})
    with pytest.raises(ValueError, match="deploy-mode 'cluster' is not possible here; the publishing driver runs inside"):
        spark_settings("spark_cluster")


def test_operator_templates_path_table_and_connections() -> None:
    op = SparkToEventHubOperator(task_id="publish", path="/data/{{ ds }}", key_column="customer")
    assert {"path", "table", "eventhub_name", "event_hubs_conn_id", "spark_conn_id", "producer_group", "generation",
            "state_backend", "state_container", "wasb_conn_id"} <= set(op.template_fields)
