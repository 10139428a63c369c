"""What the executors' Python sees: a PySpark application for ``spark-submit`` or a Spark Connect client.

``probe_app.py PARTITIONS`` runs in the session ``spark-submit`` started; ``probe_app.py PARTITIONS
sc://host:port`` connects to a Connect server. Either way each of PARTITIONS tasks reports, from
its Python worker, where it runs, its interpreter, whether Airflow is importable there, and which
``airflow`` modules importing the provider's engine loaded (none, or the engine has an Airflow
import). The last line of the output is a JSON object: ``{"driver": {...}, "tasks": [...]}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

#: the provider's Airflow-free layers, which a Spark job's executors import
ENGINE_MODULES = ("airflow_provider_eh.spark", "airflow_provider_eh.publishing", "airflow_provider_eh.client.endpoint")


def where_am_i() -> dict[str, Any]:
    """This Python's view: process, interpreter, the provider's and PySpark's origin, Airflow's absence."""
    import importlib
    import os
    import socket

    import pyspark

    engine = [importlib.import_module(name) for name in ENGINE_MODULES]
    loaded = sorted(name for name in sys.modules if name == "airflow" or name.startswith("airflow."))
    try:
        import airflow

        airflow_origin = airflow.__file__ or "namespace package"
    except ImportError:
        airflow_origin = None
    return {
        "host": socket.gethostname(), "pid": os.getpid(), "ppid": os.getppid(), "cwd": os.getcwd(),
        "executable": sys.executable, "pythonpath": os.environ.get("PYTHONPATH", ""), "pyspark": pyspark.__file__,
        "provider": engine[0].__file__,
        "airflow_loaded_by_engine": loaded, "airflow": airflow_origin,
    }


def probe(_row_id: int) -> str:
    """The UDF of one row per task: a JSON of :func:`where_am_i`. A plain Python UDF (pickled rows,
    not Arrow), which needs neither pandas nor pyarrow on the executors, and runs the same in a
    classic session and through Spark Connect."""
    return json.dumps(where_am_i())


def main(partitions: int, remote: str | None) -> None:
    """Run :func:`probe` in ``partitions`` tasks of a session (``remote``: a Spark Connect URL) and print the report."""
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    builder = SparkSession.builder.appName("probe")
    spark = builder.remote(remote).getOrCreate() if remote else builder.getOrCreate()
    probe_udf = udf(probe, "string", useArrow=False)
    rows = spark.range(0, partitions, 1, partitions).select(probe_udf("id").alias("probe")).collect()
    driver = {"executable": sys.executable, "airflow_loaded": sorted(m for m in sys.modules if m.split(".")[0] == "airflow")}
    if not remote:
        driver.update(where_am_i())
    print(json.dumps({"driver": driver, "tasks": [json.loads(row.probe) for row in rows]}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
