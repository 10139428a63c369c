"""Getting a SparkSession for a publish: a master URL or a Spark Connect URL, plus conf.

No Airflow import; the operator resolves the Airflow connection into :class:`SparkSettings`.
A session that already runs in the process (a notebook, a ``spark-submit`` driver) is reused and
left running; a session built here is the caller's to stop (``owned``).

A master URL starts the Spark driver in this process: that needs a Spark distribution (``pyspark``
with its jars, or ``SPARK_HOME``) and Java, checked before PySpark tries, because PySpark ends the
process (``SystemExit``) when it finds no distribution. A Spark Connect URL needs only
``pyspark-client``; the server owns its cluster and static settings, so only the settings a
Connect session may change are sent (:func:`apply_connect_conf`).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.errors import SparkUnavailableError
from airflow_provider_eh.spark.errors import error_condition

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.conf import RuntimeConfig

log = logging.getLogger(__name__)

# Conf every publish needs. The driver's: a speculative copy of a send task would be refused anyway
# (see executor.send_rows), so do not start one; it is fixed when a cluster starts, so a Connect
# server's own value stands. The session's: Arrow batches of a moderate size keep workers' memory flat.
DRIVER_CONF: dict[str, str] = {"spark.speculation": "false"}
SESSION_CONF: dict[str, str] = {"spark.sql.execution.arrow.maxRecordsPerBatch": "5000"}


@dataclass(frozen=True)
class SparkSettings:
    """
    Where Spark runs.

    :param master: ``local[*]``, ``spark://host:7077``, ``yarn``, ``k8s://https://...``; ignored with ``remote``.
    :param remote: a Spark Connect URL ``sc://host:15002/;token=...``.
    :param conf: Spark properties of a session built here.
    :param app_name: the application's name.
    """

    master: str = "local[*]"
    remote: str | None = None
    conf: Mapping[str, Any] = field(default_factory=dict)
    app_name: str = "airflow-provider-eh-publish"

    def describe(self) -> str:
        return f"Spark Connect {self.remote.split(';', 1)[0]}" if self.remote else f"master {self.master}"


def get_session(settings: SparkSettings) -> tuple[SparkSession, bool]:
    """``(session, owned)``: the active session if there is one (``owned=False``), else a new one.

    :raises SparkUnavailableError: a master URL, and no Spark distribution or no Java here.
    """
    try:
        return _get_session(settings)
    except SystemExit as exc:  # PySpark's own search for a distribution exits rather than raising
        raise SparkUnavailableError(settings.describe(), f"PySpark gave up starting it (exit code {exc.code})") from None


def _get_session(settings: SparkSettings) -> tuple[SparkSession, bool]:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if settings.remote:
        return connect_session(settings), True
    require_spark_distribution(settings)
    builder = SparkSession.builder.appName(settings.app_name).master(settings.master)
    if settings.master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        # local executors run this interpreter, which has the provider installed (not whatever python3 is
        # first on PATH); PySpark reads the worker's interpreter from this variable when the session starts
        os.environ["PYSPARK_PYTHON"] = sys.executable
    for key, value in {**DRIVER_CONF, **SESSION_CONF, **dict(settings.conf)}.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate(), True


def find_spark_home() -> Path | None:
    """The Spark distribution PySpark would launch: ``SPARK_HOME``, else the first of the folders PySpark searches
    (``pyspark._find_spark_home``, which ends the process when none qualifies); ``None`` if there is none."""
    if os.environ.get("SPARK_HOME"):
        home = Path(os.environ["SPARK_HOME"])
        return home if (home / "bin" / "spark-submit").is_file() else None
    import pyspark.find_spark_home

    here = Path(os.path.realpath(pyspark.find_spark_home.__file__)).parent
    module = Path(pyspark.__file__).parent
    for candidate in (Path(os.path.abspath("..")), here / "spark-distribution", here, module / "spark-distribution",
                      module, Path(os.path.abspath(module / ".." / ".."))):
        if (candidate / "bin" / "spark-submit").is_file() and any((candidate / d).is_dir() for d in ("jars", "assembly")):
            return candidate
    return None


def require_spark_distribution(settings: SparkSettings) -> None:
    """Raise :class:`SparkUnavailableError` naming what is missing, unless a master session can start here."""
    from pyspark.util import is_remote_only

    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return  # spark-submit started this process and its JVM: nothing to launch
    where = settings.describe()
    if is_remote_only():
        raise SparkUnavailableError(where, "only pyspark-client is installed (the Spark Connect client, no Spark)")
    if find_spark_home() is None:
        if os.environ.get("SPARK_HOME"):
            reason = f"SPARK_HOME={os.environ['SPARK_HOME']} has no bin/spark-submit"
        else:
            reason = "pyspark is installed without its jars and bin/spark-submit, and SPARK_HOME is not set"
        raise SparkUnavailableError(where, reason)
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and (Path(java_home) / "bin" / "java").is_file()) and shutil.which("java") is None:
        raise SparkUnavailableError(where, "no Java: java is not on PATH and JAVA_HOME is not set")


def connect_session(settings: SparkSettings) -> SparkSession:
    """A Spark Connect session with the settings it may change; the refused ones reported in one warning."""
    from pyspark.sql import SparkSession

    if not settings.remote:
        raise ValueError("a Spark Connect session needs settings.remote (sc://host:port)")
    session = SparkSession.builder.remote(settings.remote).getOrCreate()
    refused = apply_connect_conf(session.conf, {**SESSION_CONF, **dict(settings.conf)})
    if refused:
        log.warning(
            "%s: not applied, the Connect server keeps its own %s (cluster or static settings, fixed when the "
            "server starts). They belong on the Connect server (start-connect-server.sh --conf KEY=VALUE, or its "
            "spark-defaults.conf); remove them from spark_conf.",
            settings.describe(), ", ".join(refused),
        )
    return session


def apply_connect_conf(conf: RuntimeConfig, settings: Mapping[str, Any]) -> list[str]:
    """
    Set ``settings`` on a Spark Connect session; the keys the server refuses, in order.

    The server refuses static and cluster settings (``spark.ui.enabled``, ``spark.executor.memory``)
    but accepts keys Spark does not know (``spark.hadoop.*``, an application's own), and the client
    cannot tell the two apart (``isModifiable`` is false for both). So each key is set on its own and
    a refusal is collected, where the builder's bulk set has the server warn once per key.
    """
    refused = []
    for key, value in settings.items():
        try:
            conf.set(key, str(value))
        except Exception as exc:
            if error_condition(exc) != "CANNOT_MODIFY_CONFIG":
                raise
            refused.append(key)
    return refused
