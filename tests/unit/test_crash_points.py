"""Crash and pause points fire once: a paused publisher that is continued is not stopped again."""

from __future__ import annotations

import os
import signal
from pathlib import Path

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


def test_of_processes_armed_with_one_claim_file_only_the_first_to_reach_the_point_fires(tmp_path: Path) -> None:
    fired: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: fired.append(signum))
    claim = tmp_path / "claimed"
    disarms = [crash_at("mid_send:1", signal.SIGUSR1, claim=claim) for _ in range(2)]  # as two armed processes would be
    try:
        reached("mid_send", 1)
        assert fired == [signal.SIGUSR1]
        assert claim.read_text() == str(os.getpid())
    finally:
        for disarm in disarms:
            disarm()
        signal.signal(signal.SIGUSR1, previous)
