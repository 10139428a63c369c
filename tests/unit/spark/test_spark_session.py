"""Getting a SparkSession where Spark is not fully installed, without starting Spark: a master URL needs a
distribution and Java and says so; PySpark's ``SystemExit`` becomes that error; a Spark Connect session
gets the settings the server accepts and the refused ones are named in one warning."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_eh.errors import SparkUnavailableError
from airflow_provider_eh.spark import session as spark_session
from airflow_provider_eh.spark.session import (
    SparkSettings,
    apply_connect_conf,
    connect_session,
    find_spark_home,
    get_session,
    require_spark_distribution,
)

LOCAL = SparkSettings(master="local[2]")


def spark_home(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "jars").mkdir()
    (root / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    return root


@pytest.fixture(autouse=True)
def pyspark_with_jars(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks after "is this pyspark-client alone?", whichever pyspark runs the tests (the wheel's
    compatibility leg has pyspark-client alone)."""
    import pyspark.util

    monkeypatch.setattr(pyspark.util, "is_remote_only", lambda: False)


def test_pyspark_client_alone_fails_naming_the_extra_and_spark_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark.util

    monkeypatch.setattr(pyspark.util, "is_remote_only", lambda: True)
    with pytest.raises(SparkUnavailableError, match=r"only pyspark-client is installed .*"
                                                    r"pip install 'airflow-provider-eh\[spark\]'.* sc://host:15002"):
        require_spark_distribution(LOCAL)


@pytest.fixture
def java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "java"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(home))
    return home


def test_spark_home_without_spark_submit_fails_naming_the_extra_and_spark_connect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert find_spark_home() is None
    with pytest.raises(SparkUnavailableError, match=rf"Spark \(master local\[2\]\) cannot start in this task: "
                                                    rf"SPARK_HOME={tmp_path} has no bin/spark-submit\. .*"
                                                    r"pip install 'airflow-provider-eh\[spark\]'.* sc://host:15002") as err:
        require_spark_distribution(LOCAL)
    assert err.value.retryable is False


def test_spark_home_and_java_let_a_master_session_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        java_home: Path) -> None:
    home = spark_home(tmp_path / "spark")
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert find_spark_home() == home
    require_spark_distribution(LOCAL)


def test_no_java_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_HOME", str(spark_home(tmp_path / "spark")))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkUnavailableError, match="no Java: java is not on PATH and JAVA_HOME is not set"):
        require_spark_distribution(LOCAL)


def test_a_driver_started_by_spark_submit_is_not_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    require_spark_distribution(LOCAL)


def test_systemexit_from_pyspark_becomes_the_error_and_never_leaves_get_session(monkeypatch: pytest.MonkeyPatch) -> None:
    def exit_like_pyspark(cls: Any) -> None:
        raise SystemExit(-1)

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(exit_like_pyspark))
    with pytest.raises(SparkUnavailableError, match=r"master local\[2\]\) cannot start in this task: PySpark gave up "
                                                    r"starting it \(exit code -1\)"):
        get_session(LOCAL)


class RefusedConfig(Exception):
    def getCondition(self) -> str:
        return "CANNOT_MODIFY_CONFIG"


class ConnectConf:
    """A Spark Connect session's conf as the server answers: static and cluster settings refused."""

    REFUSED = {"spark.ui.enabled", "spark.executor.memory", "spark.speculation"}

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        if key in self.REFUSED:
            raise RefusedConfig(f'[CANNOT_MODIFY_CONFIG] Cannot modify the value of the Spark config: "{key}"')
        self.values[key] = value


def test_connect_conf_sets_what_the_server_accepts_and_returns_the_refused_keys() -> None:
    conf = ConnectConf()
    refused = apply_connect_conf(conf, {"spark.ui.enabled": False, "spark.sql.shuffle.partitions": 3,
                                        "spark.hadoop.fs.s3a.endpoint": "http://s3", "spark.executor.memory": "1g"})
    assert refused == ["spark.ui.enabled", "spark.executor.memory"]
    assert conf.values == {"spark.sql.shuffle.partitions": "3", "spark.hadoop.fs.s3a.endpoint": "http://s3"}


def test_connect_conf_other_errors_are_raised() -> None:
    class Broken:
        def set(self, key: str, value: str) -> None:
            raise ConnectionError("server gone")

    with pytest.raises(ConnectionError):
        apply_connect_conf(Broken(), {"spark.sql.shuffle.partitions": "3"})


def test_connect_session_names_refused_settings_in_one_warning_and_sends_no_driver_settings(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    conf = ConnectConf()
    built: list[dict[str, Any]] = []

    class Session:
        def __init__(self) -> None:
            self.conf = conf

    def get_or_create(builder: Any) -> Session:
        built.append(dict(builder._options))
        return Session()

    monkeypatch.setattr(type(SparkSession.builder), "getOrCreate", get_or_create)
    settings = SparkSettings(remote="sc://connect.example:15002/;token=secret",
                             conf={"spark.ui.enabled": "false", "spark.executor.memory": "1g",
                                   "spark.sql.shuffle.partitions": "3"})
    with caplog.at_level(logging.WARNING, logger=spark_session.__name__):
        connect_session(settings)
    assert built == [{"spark.remote": "sc://connect.example:15002/;token=secret"}], "settings went through the builder"
    assert conf.values == {"spark.sql.execution.arrow.maxRecordsPerBatch": "5000", "spark.sql.shuffle.partitions": "3"}
    assert [r.getMessage() for r in caplog.records] == [
        "Spark Connect sc://connect.example:15002/: not applied, the Connect server keeps its own spark.ui.enabled, "
        "spark.executor.memory (cluster or static settings, fixed when the server starts). They belong on the Connect "
        "server (start-connect-server.sh --conf KEY=VALUE, or its spark-defaults.conf); remove them from spark_conf."
    ]
