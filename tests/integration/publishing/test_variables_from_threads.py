"""The Variables backend's calls from a task's threads (a publish checks each partition's claim token on
a thread of its own) under ``dag.test()``, whose in-process channel to the execution API is one queue
of answers for every thread: each thread must read back what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from airflow_provider_eh.testing.dag_test import failure_report
from tests.conftest import REPO

DAG_FILE = '''
from datetime import datetime
from concurrent.futures import ThreadPoolExecutor
from airflow.sdk import dag, task

THREADS, ROUNDS = 16, 60


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False)
def variables_from_threads():
    @task
    def many_threads() -> dict:
        from airflow_provider_eh.hooks.producer_state import AirflowVariables

        variables = AirflowVariables()

        def writer(thread: int) -> list:
            wrong = []
            for round in range(ROUNDS):
                key, value = f"eh_threads.{thread}", f"thread {thread} round {round}"
                variables.set(key, value)
                read = variables.get(key)
                if read != value:
                    wrong.append([value, read])
            return wrong

        import sys

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # threads take turns as often as they can: the races show within a run
        try:
            with ThreadPoolExecutor(THREADS) as pool:
                wrong = [w for found in pool.map(writer, range(THREADS)) for w in found]
        finally:
            sys.setswitchinterval(interval)
        assert not wrong, f"{len(wrong)} reads returned another thread's answer, e.g. {wrong[:3]}"
        return {"calls": 2 * THREADS * ROUNDS}

    many_threads()


dag = variables_from_threads()
'''

RUN = textwrap.dedent("""
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("variables_from_threads", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    run = module.dag.test()
    print(json.dumps({ti.task_id: str(ti.state) for ti in run.get_task_instances()}))
""")


def test_every_thread_of_a_dag_test_task_reads_back_its_own_variable(airflow_db: Path, tmp_path: Path) -> None:
    dag_file = tmp_path / "variables_from_threads.py"
    dag_file.write_text(DAG_FILE)
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", RUN, str(dag_file)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, failure_report(run.stdout + run.stderr)
    states = json.loads(run.stdout.strip().splitlines()[-1])
    assert states == {"many_threads": "success"}, failure_report(run.stdout + run.stderr)
