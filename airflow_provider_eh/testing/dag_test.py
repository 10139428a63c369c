"""Acting beside a running ``dag.test()``: what a test does while the DAG run is in progress in the same process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


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
