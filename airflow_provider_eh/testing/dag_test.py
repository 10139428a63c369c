"""Running ``dag.test()`` in a test, and acting beside it while the DAG run is in progress in the same process."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_BUNDLES = "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"
_LOCAL_BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"


def run_dag(dag: Any, **test_kwargs: Any) -> Any:
    """``dag.test(**test_kwargs)`` wherever the DAG's file is, and the DAG run it returns.

    Airflow's ``dag.test()`` (from 3.2) creates the run from the DAG as its DAG bundles hold it, so a DAG
    whose file is outside every configured bundle (a test's DAG, with ``[core] dags_folder`` elsewhere)
    fails with "Cannot create DagRun ... because the dag is not serialized". Here the DAG's folder is
    added as a bundle of its own for the run, where no local bundle holds it already.

    :param dag: the DAG, as its file defines it.
    :param test_kwargs: what ``dag.test()`` takes: ``logical_date``, ``run_conf``...
    """
    with dag_bundle(Path(dag.fileloc).parent):
        return dag.test(**test_kwargs)


@contextmanager
def dag_bundle(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, ``folder`` is a DAG bundle (a local one, beside the configured ones).

    Nothing changes where a configured local bundle (the DAGs folder, by default) holds ``folder``
    already. The bundle list is set as the environment variable Airflow reads it from, and restored
    after the block.

    :param folder: the folder of the DAG files.
    """
    from airflow import settings
    from airflow.configuration import conf

    folder = Path(folder).resolve()
    configured = conf.getjson("dag_processor", "dag_bundle_config_list", fallback=None)
    bundles: list[dict[str, Any]] = configured if isinstance(configured, list) else []
    for bundle in bundles:
        if bundle.get("classpath") == _LOCAL_BUNDLE:
            path = Path((bundle.get("kwargs") or {}).get("path") or settings.DAGS_FOLDER).resolve()
            if folder.is_relative_to(path):
                yield
                return
    name = "dag-test-" + hashlib.sha256(str(folder).encode()).hexdigest()[:10]
    added = [*bundles, {"name": name, "classpath": _LOCAL_BUNDLE, "kwargs": {"path": str(folder)}}]
    before = os.environ.get(_BUNDLES)
    os.environ[_BUNDLES] = json.dumps(added)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_BUNDLES, None)
        else:
            os.environ[_BUNDLES] = before


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
