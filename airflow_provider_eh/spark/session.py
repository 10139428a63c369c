"""Getting a SparkSession for a publish: a master URL or a Spark Connect URL, plus conf.

No Airflow import; the operator resolves the Airflow connection into :class:`SparkSettings`.
A session that already runs in the process (a notebook, a ``spark-submit`` driver) is reused and
left running; a session built here is the caller's to stop (``owned``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Conf every publish needs: a speculative copy of a send task would be refused anyway (see
# executor.send_rows), so do not start one; Arrow batches of a moderate size keep workers' memory flat.
DEFAULT_CONF: dict[str, str] = {
    "spark.speculation": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "5000",
}


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
    """``(session, owned)``: the active session if there is one (``owned=False``), else a new one."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(settings.app_name)
    builder = builder.remote(settings.remote) if settings.remote else builder.master(settings.master)
    conf = {**DEFAULT_CONF, **dict(settings.conf)}
    if not settings.remote and settings.master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        # local executors run this interpreter, which has the provider installed (not whatever python3 is
        # first on PATH); PySpark reads the worker's interpreter from this variable when the session starts
        os.environ["PYSPARK_PYTHON"] = sys.executable
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    return builder.getOrCreate(), True
