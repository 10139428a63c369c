"""What one test file leaves behind for the next file on the same pytest-xdist worker: nothing.

Files share a worker process (``--dist loadfile``), so an environment variable a test or a fixture
sets and does not undo, or a process it starts and does not stop, reaches every later file on that
worker, and through ``os.environ`` every child process those files start (an example DAG run, a
Spark job, ``airflow standalone``). Such leaks make a file pass alone and fail after another one.

Each file is checked as a whole, from before its first test's set-up to after its last test's
tear-down (module fixtures included): its last test gets an error if ``os.environ`` differs
afterwards, or if a child process it started is still running. The environment is put back either
way, and the leftover processes are killed, so one leak does not turn into another file's failure.
Processes that session-scoped fixtures start (the local stack, the in-process Spark session's JVM)
and the variables they set are the session's, not leaks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

_kept: set[int] = set()
EXIT_GRACE = 5.0


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest) -> Iterator[Any]:
    """What a session-scoped fixture starts lives for the session: its processes are kept, and what it
    put in ``os.environ`` (PySpark's gateway settings, say) becomes part of every file's baseline."""
    if fixturedef.scope != "session":
        yield
        return
    before, env_before = set(_children()), dict(os.environ)
    yield
    _kept.update(set(_children()) - before)
    env_after = dict(os.environ)
    for state in _state.values():
        state.env.update({k: v for k, v in env_after.items() if env_before.get(k) != v})
        for gone in env_before.keys() - env_after.keys():
            state.env.pop(gone, None)


def _children() -> dict[int, psutil.Process]:
    """This process's live descendants, less the session's kept processes and theirs."""
    me = psutil.Process()
    found: dict[int, psutil.Process] = {}
    excluded: set[int] = set()
    for pid in _kept:
        try:
            proc = psutil.Process(pid)
            excluded.add(pid)
            excluded.update(p.pid for p in proc.children(recursive=True))
        except psutil.Error:
            continue
    for proc in me.children(recursive=True):
        try:
            if proc.pid not in excluded and proc.status() != psutil.STATUS_ZOMBIE:
                found[proc.pid] = proc
        except psutil.Error:
            continue
    return found


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())[:200]}"
    except psutil.Error:
        return f"pid {proc.pid}"


#: pytest's own, set and removed around every test phase
_PYTEST_OWN = "PYTEST_CURRENT_TEST"


def _env_diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The changed names only: values may be secrets (connection strings)."""
    before, after = ({k: v for k, v in env.items() if k != _PYTEST_OWN} for env in (before, after))
    lines = [f"set {k}" for k in sorted(after.keys() - before.keys())]
    lines += [f"removed {k}" for k in sorted(before.keys() - after.keys())]
    lines += [f"changed {k}" for k in sorted(k for k in before.keys() & after.keys() if before[k] != after[k])]
    return lines


class _FileState:
    def __init__(self) -> None:
        self.env = dict(os.environ)
        self.pids = set(_children())


_state: dict[str, _FileState] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[Any]:
    path = str(item.path)
    if path not in _state:
        _state[path] = _FileState()
    yield
    if nextitem is not None and str(nextitem.path) == path:
        return
    state = _state.pop(path)
    leaks = _env_diff(state.env, dict(os.environ))
    if leaks:
        current = os.environ.get(_PYTEST_OWN)
        os.environ.clear()
        os.environ.update({k: v for k, v in state.env.items() if k != _PYTEST_OWN})
        if current is not None:
            os.environ[_PYTEST_OWN] = current
    # a process told to stop in a tear-down may take a moment to go: only one still there after
    # EXIT_GRACE seconds is left behind
    leftover = [proc for pid, proc in _children().items() if pid not in state.pids]
    _gone, alive = psutil.wait_procs(leftover, timeout=EXIT_GRACE) if leftover else ([], [])
    left = {proc.pid: _describe(proc) for proc in alive}
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    problems = [f"os.environ: {line}" for line in leaks] + [f"still running (killed): {d}" for d in left.values()]
    if problems:
        # an error at the tear-down of the file's last test, which pytest-xdist carries to the summary
        message = (f"{item.path.name} left this behind for the next test file on this worker; undo it in the "
                   "test or fixture that did it:\n  " + "\n  ".join(problems))
        report = pytest.TestReport(item.nodeid, item.location, {}, "failed", message, "teardown")
        item.ihook.pytest_runtest_logreport(report=report)
