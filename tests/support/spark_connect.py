"""A Spark Connect server as a child process, started from the installed Spark distribution, for tests.

The server class ships in ``pyspark``'s own jars (``spark-connect_2.13-*.jar``), so nothing is
downloaded: ``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`` on a
``local[N]`` master, listening on 127.0.0.1 only. Its Python workers run ``python`` (default: this
interpreter), which must have the provider installed, as a real Connect server's executors must.
A DAG under test reaches it through a ``spark_connect`` connection on :attr:`SparkConnectServer.port`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from eventhubs_local.ports import free_port, wait_listening

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

# A small server on a shared machine: no UI, few shuffle partitions, a JVM that starts quickly
# (C1 only) and collects serially.
SMALL_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


class SparkConnectServer:
    """
    A Spark Connect server on ``127.0.0.1:port`` running ``master``; ``stop()`` ends it and its workers.

    :param location: working folder (warehouse, logs).
    :param port: 0 picks a free port.
    :param master: the server's own master, ``local[2]`` by default.
    :param conf: Spark properties of the server (:data:`SMALL_CONF` by default).
    :param python: the interpreter of its Python workers.
    :param py_files: ``.zip`` files on its executors' ``PYTHONPATH`` (``spark.executorEnv.PYTHONPATH``) and its own,
        for a ``python`` without the provider: at this path on every executor's machine (a cluster on
        this one). Spark Connect puts on its Python workers' ``sys.path`` a session's own artifacts
        only (``SparkSession.addArtifacts(..., pyfile=True)``), not the server's ``--py-files``.
    :param spark_home: the Spark distribution to run (default: the one PySpark here would launch).
    """

    def __init__(self, location: str | os.PathLike[str], *, port: int = 0, master: str = "local[2]",
                 conf: Mapping[str, str] | None = None, python: str = sys.executable,
                 py_files: Sequence[str | os.PathLike[str]] = (), spark_home: str | os.PathLike[str] | None = None):
        self.location = Path(location)
        self.port = port or free_port()
        self.master = master
        self.conf = dict(SMALL_CONF if conf is None else conf)
        self.python = python
        self.py_files = [str(path) for path in py_files]
        self.spark_home = None if spark_home is None else Path(spark_home)
        self.log_path = self.location / "spark-connect.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180) -> SparkConnectServer:
        from airflow_provider_eh.spark.session import find_spark_home

        home = self.spark_home or find_spark_home()
        if home is None:
            raise FileNotFoundError("no Spark distribution to start a Connect server from: install pyspark or set SPARK_HOME")
        conf = {**self.conf, "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(self.port), "spark.driver.host": "127.0.0.1"}
        argv = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", self.master,
                "--name", "Spark Connect server"]
        if self.py_files:
            conf["spark.executorEnv.PYTHONPATH"] = os.pathsep.join(str(Path(path).resolve()) for path in self.py_files)
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        argv.append("spark-internal")
        env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": self.python, "SPARK_LOCAL_IP": "127.0.0.1"}
        if self.py_files:  # and the server's own Python workers (a data source's writer and commit run there)
            env["PYTHONPATH"] = os.pathsep.join(str(Path(path).resolve()) for path in self.py_files)
        self.location.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(argv, env=env, cwd=self.location, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_listening(self._proc, "127.0.0.1", self.port, timeout, what="the Spark Connect server",
                           details=lambda: ":\n" + self.tail(), interval=0.5)
        except TimeoutError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End the server's process group (the JVM and its Python workers), which :meth:`start` created."""
        if self._proc is not None:
            if self._proc.poll() is None:
                os.killpg(self._proc.pid, signal.SIGTERM)
                try:
                    self._proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                    self._proc.wait()
            try:  # workers left behind in the group
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """SIGKILL the server as a crash would: its JVM and every Python process of its session (``pyspark.daemon``
        workers move to process groups of their own), then close what :meth:`stop` closes."""
        from tests.support.spark_cluster import kill_session

        if self._proc is not None:
            kill_session(self._proc.pid)
        self.stop()

    def tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
