"""``dag.test()`` of one DAG file in its own process, as a script (PySpark treats a ``python -c`` main as its doctests).

``python dag_test_runner.py DAG_FILE LOGICAL_DATE``: runs the file's ``dag`` for the date and prints
``RESULT {"state", "ti" (of task ``publish``), "xcom", "failed"}`` as one JSON line.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime

from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import select

from airflow_provider_eh.testing.dag_test import failed_tasks


def main(dag_file: str, logical_date: str) -> None:
    spec = importlib.util.spec_from_file_location("dag_under_test", dag_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test(logical_date=datetime.fromisoformat(logical_date))
    ti = run.get_task_instance("publish")
    with create_session() as session:
        rows = session.scalars(select(XComModel).where(XComModel.dag_id == run.dag_id, XComModel.run_id == run.run_id)).all()
        xcom = {f"{x.task_id}.{x.key}": XComModel.deserialize_value(x) for x in rows}
    print("RESULT " + json.dumps({"state": str(run.state), "ti": str(ti.state), "xcom": xcom,
                                   "failed": failed_tasks(run)}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
