"""Crash and pause points fire once: a paused publisher that is continued is not stopped again."""

from __future__ import annotations

import signal

from airflow_provider_eh.steps import reached
from airflow_provider_eh.testing.crash import crash_at


def test_a_point_fires_once_though_other_partitions_reach_it_later() -> None:
    fired: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: fired.append(signum))
    disarm = crash_at("mid_send:1", signal.SIGUSR1)
    try:
        reached("mid_send", 1)  # partition 0's first SDK batch
        reached("mid_send", 1)  # partition 1's
        reached("before_send", 1)
        assert fired == [signal.SIGUSR1]
    finally:
        disarm()
        signal.signal(signal.SIGUSR1, previous)
