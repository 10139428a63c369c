"""A test that outlives its timeout by far ends its pytest-xdist worker, and says where it was stuck.

pytest-timeout's signal method arms ``SIGALRM`` through ``ITIMER_REAL``, and Airflow disarms that
timer: every in-process DAG import (``dag.test()``, a ``DagBag``) runs under Airflow's own timeout,
which sets ``ITIMER_REAL`` and clears it afterwards. A test of that kind that then blocks is stopped by
nothing: the worker waits forever and so does the whole run, which ends only when CI kills it, with
no word on what hung.

This plugin keeps a thread of its own in each process. When the test in progress (set-up, call and
tear-down) has run for its timeout plus :data:`GRACE` seconds (120, or ``EH_WATCHDOG_GRACE``), it writes the Python stack of every
thread and the processes the worker started to ``<dir>/watchdog-<worker>.txt``, kills those processes
and ends the worker with exit status 70. pytest-xdist then reports the test as failed ("worker
crashed") and goes on with a fresh worker; the controller prints the files at the end of the run.
The directory is ``EH_WATCHDOG_DIR``, set by the controller for its workers.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

GRACE = float(os.environ.get("EH_WATCHDOG_GRACE", "120"))
EXIT_STATUS = 70
_DIR_VAR = "EH_WATCHDOG_DIR"
_current: tuple[str, float, float] | None = None  # (nodeid, started, limit in seconds)
_made: str | None = None  # the directory this process made for the reports


def _limit(item: pytest.Item) -> float | None:
    marker = item.get_closest_marker("timeout")
    seconds = float(marker.args[0] if marker and marker.args else item.config.getini("timeout") or 0)
    return seconds + GRACE if seconds > 0 else None


def _report(nodeid: str, ran: float, limit: float) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    where = Path(os.environ.get(_DIR_VAR) or tempfile.gettempdir()) / f"watchdog-{worker}.txt"
    children = psutil.Process().children(recursive=True)
    with where.open("w") as out:
        out.write(f"{nodeid} ran {ran:.0f} s, past its timeout plus {GRACE:.0f} s ({limit:.0f} s), on {worker}; "
                  "the stack of every thread of that process:\n")
        out.flush()
        faulthandler.dump_traceback(file=out, all_threads=True)
        out.write("\nthe processes it had started (killed now):\n")
        for child in children:
            try:
                out.write(f"  {child.pid} {child.status()} {' '.join(child.cmdline())[:300]}\n")
            except psutil.Error:
                continue
    for child in children:
        try:
            child.kill()
        except psutil.Error:
            continue
    print(where.read_text(), file=sys.__stderr__, flush=True)
    os._exit(EXIT_STATUS)


def _watch() -> None:
    while True:
        time.sleep(5)
        current = _current
        if current is not None and time.monotonic() - current[1] > current[2]:
            _report(current[0], time.monotonic() - current[1], current[2])


def pytest_configure(config: pytest.Config) -> None:
    global _made
    if not hasattr(config, "workerinput") and not os.environ.get(_DIR_VAR):  # the controller, or a run without xdist
        _made = os.environ[_DIR_VAR] = tempfile.mkdtemp(prefix="eh-watchdog-")
    threading.Thread(target=_watch, name="eh-watchdog", daemon=True).start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    global _current
    limit = _limit(item)
    _current = (item.nodeid, time.monotonic(), limit) if limit else None
    try:
        yield
    finally:
        _current = None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return
    for report in sorted(Path(os.environ.get(_DIR_VAR, "/nonexistent")).glob("watchdog-*.txt")):
        terminalreporter.section(f"watchdog: {report.name}", sep="=")
        terminalreporter.write(report.read_text())


def pytest_unconfigure(config: pytest.Config) -> None:
    if _made:
        os.environ.pop(_DIR_VAR, None)
        shutil.rmtree(_made, ignore_errors=True)
