"""Waiting for a test's child process to stop itself at a pause point (SIGSTOP), and resuming it."""

from __future__ import annotations

import signal
import time

import psutil


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def wait_stopped(pid: int, timeout: float = 120) -> None:
    """Wait until process ``pid``, or one of its children (an Airflow task's), has stopped itself."""
    deadline = time.monotonic() + timeout
    while not any(p.status() == psutil.STATUS_STOPPED for p in _tree(pid)):
        assert psutil.Process(pid).status() != psutil.STATUS_ZOMBIE, f"process {pid} ended before its pause point"
        assert time.monotonic() < deadline, f"process {pid} did not reach its pause point in {timeout} s"
        time.sleep(0.1)


def resume(pid: int) -> None:
    """SIGCONT to process ``pid`` and its children."""
    for p in _tree(pid):
        p.send_signal(signal.SIGCONT)
