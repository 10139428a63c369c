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
