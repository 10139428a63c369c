"""Crash and stall tests for your own pipelines: SIGKILL or pause a process at one step of the protocol.

``crash_at("mid_send:2")`` makes this process kill itself with SIGKILL the moment the engine
reaches that step (:data:`airflow_provider_eh.steps.PUBLISH_STEPS`; ``mid_send:K`` once K SDK
batches of a partition are acknowledged): no ``finally`` block, no lease release, no flush, like a
worker lost to the OOM killer. A retry of the same task must then publish each event once.

``pause_at("mid_send:1")`` stops the process with SIGSTOP there instead, as a frozen VM, a long
GC pause or a suspended laptop would: the test takes over meanwhile and resumes it with SIGCONT.

Processes a test does not start itself (Spark's Python workers, an Airflow task subprocess) are
reached through the environment: set ``AIRFLOW_PROVIDER_EH_CRASH_AT`` (or ``..._PAUSE_AT``) and have
the process call :func:`crash_at_from_env` on start (a ``sitecustomize`` module on the test's
``PYTHONPATH`` can). Nothing in the engine reads those variables.

Where many processes are armed (every task of a Celery worker, say) and only one of them is to fire,
give them one claim file (``claim=``, or ``AIRFLOW_PROVIDER_EH_CRASH_CLAIM``): the first process
reaching the point creates it, writes its PID into it and fires; the others go on.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_eh.steps import COUNTED_STEPS, INGEST_STEPS, PUBLISH_STEPS, REPLAY_STEPS, observe

ENV = "AIRFLOW_PROVIDER_EH_CRASH_AT"
PAUSE_ENV = "AIRFLOW_PROVIDER_EH_PAUSE_AT"
CLAIM_ENV = "AIRFLOW_PROVIDER_EH_CRASH_CLAIM"


def parse(point: str) -> tuple[str, int]:
    """``"mid_send:2"`` -> ``("mid_send", 2)``; refuses a step the engine does not have."""
    name, _, count = point.strip().partition(":")
    steps = PUBLISH_STEPS + INGEST_STEPS + REPLAY_STEPS
    if name not in steps:
        raise ValueError(f"crash point {point!r}: unknown step; choose one of {', '.join(steps)}")
    if count and not count.isdigit():
        raise ValueError(f"crash point {point!r}: the count after ':' must be a whole number")
    return name, int(count or 0)


def _claimed(claim: str | os.PathLike[str] | None) -> bool:
    """True when there is no claim file, or this process has just created it (and written its PID into it)."""
    if claim is None:
        return True
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as out:
        out.write(str(os.getpid()))
    return True


def crash_at(point: str, signum: int = signal.SIGKILL, claim: str | os.PathLike[str] | None = None) -> Callable[[], None]:
    """SIGKILL (or ``signum``) this process when the engine reaches ``point``; returns the function that disarms it.

    It fires once: the first time any partition (or ingestion batch) reaches the point.

    :param claim: a file that does not exist yet: of the processes armed with it, only the first to
        reach the point fires (it creates the file with its PID).
    """
    name, count = parse(point)
    fired = threading.Lock()

    def observer(step: str, reached_count: int, _detail: Mapping[str, Any]) -> None:
        # ingest_*:K: the K-th batch, or the first later one (a blob checkpoint may cover several)
        if step == name and (
            (name not in COUNTED_STEPS and name not in INGEST_STEPS) or reached_count == count
            or (name in INGEST_STEPS and reached_count >= count)
        ) and fired.acquire(blocking=False):
            disarm()
            if _claimed(claim):
                # to this thread: the whole process stops (or dies) all the same, and this thread before
                # it returns; signalled through the process, the kernel may pick another thread, and the
                # one at the point could send its next batch before the stop reaches it
                signal.pthread_kill(threading.get_ident(), signum)

    disarm = observe(observer)
    return disarm


def pause_at(point: str, claim: str | os.PathLike[str] | None = None) -> Callable[[], None]:
    """Stop this process (SIGSTOP) the first time the engine reaches ``point``, until something sends it
    SIGCONT; once continued it goes on (other partitions reaching the point later do not stop it again).
    ``claim`` as for :func:`crash_at`."""
    return crash_at(point, signal.SIGSTOP, claim)


def crash_at_from_env() -> Callable[[], None] | None:
    """:func:`crash_at` the point named by ``AIRFLOW_PROVIDER_EH_CRASH_AT``, else :func:`pause_at` the
    one named by ``AIRFLOW_PROVIDER_EH_PAUSE_AT``, if either is set; with the claim file named by
    ``AIRFLOW_PROVIDER_EH_CRASH_CLAIM``, if that is set."""
    claim = os.environ.get(CLAIM_ENV, "").strip() or None
    point = os.environ.get(ENV, "").strip()
    if point:
        return crash_at(point, claim=claim)
    paused = os.environ.get(PAUSE_ENV, "").strip()
    return pause_at(paused, claim) if paused else None
