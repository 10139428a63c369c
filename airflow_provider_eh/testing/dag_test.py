"""Acting beside a running ``dag.test()``: what a test does while the DAG run is in progress in the same process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def when(condition: Callable[[], bool], then: Callable[[], None], timeout: float = 60) -> threading.Thread:
    """In a daemon thread: wait until ``condition()`` holds (polled every 0.2 s), then run ``then()``.

    Gives up silently after ``timeout`` seconds: the test's own assertions report what did not happen.
    """
    # Import and configure the ORM here, before the thread starts: importing models from two threads
    # at once deadlocks.
    from sqlalchemy.orm import configure_mappers

    import airflow.models.dagrun  # noqa: F401
    import airflow.models.taskinstance  # noqa: F401
    import airflow.models.taskreschedule  # noqa: F401
    import airflow.models.trigger  # noqa: F401

    configure_mappers()

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)
        then()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def returned(ti: Any) -> Any:
    """What task instance ``ti`` returned (its ``return_value`` XCom), or ``None``."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=ti.run_id, key="return_value", dag_ids=ti.dag_id, task_ids=ti.task_id)
        ).first()
        return None if row is None else XComModel.deserialize_value(row)


def deferred_to(dag_id: str, trigger_classpath: str) -> Callable[[], bool]:
    """A condition: a task of ``dag_id`` is deferred to a trigger of class ``trigger_classpath``."""

    def check() -> bool:
        from sqlalchemy import select

        from airflow.models.taskinstance import TaskInstance
        from airflow.models.trigger import Trigger
        from airflow.utils.session import create_session

        with create_session() as session:
            return session.scalar(
                select(Trigger.id).join(TaskInstance, TaskInstance.trigger_id == Trigger.id)
                .where(TaskInstance.dag_id == dag_id, Trigger.classpath == trigger_classpath)
            ) is not None

    return check


FAILED_STATES = ("failed", "upstream_failed", "up_for_retry")
_ERROR_START = ("Traceback (most recent call last)", "Task failed with exception", "[DAG TEST] Error running task")


def failed_tasks(dag_run: Any) -> list[str]:
    """``"task_id[map_index]: state"`` of every task instance of ``dag_run`` that did not succeed."""
    return [f"{ti.task_id}{'' if ti.map_index < 0 else f'[{ti.map_index}]'}: {ti.state}"
            for ti in dag_run.get_task_instances() if str(ti.state) in FAILED_STATES]


def task_errors(output: str) -> list[str]:
    """Each error a ``dag.test()`` run logged: its first line, and the exception its traceback ended in
    (the last of a chain)."""
    lines = output.splitlines()
    errors: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(" ") or not any(mark in line for mark in _ERROR_START):
            i += 1
            continue
        end, exception = i + 1, ""
        while end < len(lines):
            current = lines[end]
            if current.startswith((" ", "Traceback")) or not current.strip():
                end += 1
                continue
            after = next((x for x in lines[end + 1:] if x.strip()), "")
            if current.startswith(("During handling", "The above exception")) or after.startswith(
                    ("During handling", "The above exception")):
                end += 1  # a chained exception: the last one is the cause to report
                continue
            exception = current
            break
        errors.append(f"{line.strip()}\n    -> {exception.strip()}" if exception else line.strip())
        i = end + 1
    return errors


def failure_report(output: str, failed: list[str] | None = None, tail: int = 60) -> str:
    """Why a ``dag.test()`` run in a child process failed: its failed tasks, their errors, the output's tail.

    For a test's assertion message: ``output`` is the child's stdout and stderr (``dag.test()`` logs
    its tasks there), ``failed`` what :func:`failed_tasks` returned in the child.
    """
    parts = [f"failed tasks: {', '.join(failed)}" if failed else "failed tasks: (not reported)"]
    errors = task_errors(output)
    parts.append("errors:\n  " + "\n  ".join(errors) if errors else "errors: none logged")
    parts.append(f"last {tail} lines of the output:\n" + "\n".join(output.splitlines()[-tail:]))
    return "\n".join(parts)


def log_tail(path: Any, lines: int = 40) -> str:
    """The last ``lines`` of a task's log file, Airflow 3's JSON lines shown as ``level event`` and the error."""
    import json
    from pathlib import Path

    shown = []
    for raw in Path(path).read_text(errors="replace").splitlines()[-lines:]:
        try:
            record = json.loads(raw)
        except ValueError:
            shown.append(raw)
            continue
        line = f"{record.get('level', '')} {record.get('event', '')}".strip()
        for detail in record.get("error_detail") or []:
            if isinstance(detail, dict):
                line += f"\n    -> {detail.get('exc_type')}: {detail.get('exc_value')}"
        shown.append(line)
    return f"  log {path} (last {lines} lines):\n    " + "\n    ".join(shown)
