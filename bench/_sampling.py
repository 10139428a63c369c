"""What both soaks measure of a process, and how they turn a series of samples into growth."""

from __future__ import annotations

import psutil


def measure(proc: psutil.Process) -> tuple[float, int]:
    """(RSS in MiB, open file descriptors)."""
    with proc.oneshot():
        return proc.memory_info().rss / 2**20, proc.num_fds()


def growth(series: list[float], warmup: int) -> float:
    """Percent growth from the end of the warm-up (sample ``warmup``) to the mean of the last five samples."""
    base, tail = series[warmup - 1], series[-5:]
    return (sum(tail) / len(tail) - base) / base * 100
