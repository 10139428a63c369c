"""What a test's assertion message says when a DAG run fails: the failed tasks, their errors, the log's tail."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_provider_eh.testing.dag_test import failure_report, log_tail, task_errors

# dag.test()'s output of a run whose task ``bad`` raised (Airflow 3.3, logging level WARNING)
DAG_TEST_OUTPUT = """fine
2026-11-25T04:51:16.242713Z [error    ] Task failed with exception     [task] loc=task_runner.py:1676
Traceback (most recent call last):
  File "/venv/airflow/sdk/execution_time/task_runner.py", line 1579, in _run_task_and_map_outcome
    result = _execute_task(context=context, ti=ti, log=log)
  File "/dags/boom.py", line 10, in bad
    raise ValueError("the boom happened here")
ValueError: the boom happened here
RESULT {"date": "2026-11-03", "state": "failed", "failed": ["bad: failed"]}
"""


def test_the_report_names_the_failed_task_and_the_exception_it_raised() -> None:
    report = failure_report(DAG_TEST_OUTPUT, ["bad: failed"], tail=3)
    assert report.splitlines()[0] == "failed tasks: bad: failed"
    assert "Task failed with exception" in report and "-> ValueError: the boom happened here" in report
    assert report.endswith('ValueError: the boom happened here\nRESULT {"date": "2026-11-03", "state": "failed", '
                           '"failed": ["bad: failed"]}')


def test_a_chained_exception_reports_the_last_one() -> None:
    output = ("Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'a'\n\n"
              "During handling of the above exception, another exception occurred:\n\n"
              "Traceback (most recent call last):\n  File \"y\", line 2\nRuntimeError: the real cause\nnext line\n")
    assert task_errors(output) == ["Traceback (most recent call last):\n    -> RuntimeError: the real cause"]


def test_a_run_that_logged_no_error_says_so_and_keeps_the_tail() -> None:
    report = failure_report("line 1\nline 2\n", None, tail=1)
    assert report == "failed tasks: (not reported)\nerrors: none logged\nlast 1 lines of the output:\nline 2"


def test_a_task_log_file_of_json_lines_reads_as_level_event_and_error(tmp_path: Path) -> None:
    path = tmp_path / "attempt=1.log"
    records = [
        {"timestamp": "t", "event": "Filling up the DagBag", "level": "info"},
        {"timestamp": "t", "event": "Task failed with exception", "level": "error",
         "error_detail": [{"exc_type": "ValueError", "exc_value": "the boom happened here", "frames": []}]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\nnot json\n")
    assert log_tail(path, 3).splitlines()[1:] == [
        "    info Filling up the DagBag",
        "    error Task failed with exception",
        "    -> ValueError: the boom happened here",
        "    not json",
    ]
