"""A test's own ``os.fork()`` child, which can never run on as a second copy of the test process.

A forked child of a pytest-xdist worker shares the worker's channel to the controller: a child that
raised and returned into pytest would run tests and report on that channel, and a child stuck on a
lock some other thread held at the fork would leave the test waiting for ever. :func:`fork_run` ends
the child with ``os._exit`` whatever ``child`` does (status 3 if it raised) and SIGKILLs it after
``timeout`` seconds.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable


def fork_run(child: Callable[[], int | None], timeout: float = 60) -> int:
    """Run ``child`` in a forked process and wait for it: its exit code (``child``'s return value, 0 for
    ``None``), ``-N`` for a child ended by signal N. A child still running after ``timeout`` seconds is
    SIGKILLed and reported as an ``AssertionError``."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's outcome is its exit code
        code = 3
        try:
            code = child() or 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the forked child (pid {pid}) did not end within {timeout} s")
        time.sleep(0.05)
