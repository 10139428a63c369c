"""The data source's commit over several processes: which partitions each publishes, how many there are, and
that each ends with the process that started it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from test_datasource_options import BASE

from airflow_provider_eh.spark.datasource.commit_processes import (
    EVENTS_PER_PROCESS,
    commit_processes,
    partition_groups,
    runs_of,
)
from airflow_provider_eh.spark.datasource.options import WriteOptions
from airflow_provider_eh.spark.datasource.staging import StagedRun

REPO = Path(__file__).resolve().parents[3]


def test_groups_hold_each_partition_with_events_once_and_about_equal_events() -> None:
    counts = {"0": 9000, "1": 1000, "2": 5000, "3": 5000, "4": 0, "10": 1000}
    groups = partition_groups(counts, 2)
    assert sorted(p for g in groups for p in g) == sorted(p for p, n in counts.items() if n)  # "4" has no events
    loads = sorted(sum(counts[p] for p in g) for g in groups)
    assert loads == [10_000, 11_000]
    assert all(g == sorted(g, key=lambda p: (len(p), p)) for g in groups)
    assert partition_groups(counts, 8) == [["0"], ["2"], ["3"], ["1"], ["10"]]  # no empty group
    assert partition_groups({"0": 5}, 3) == [["0"]]


def test_the_number_of_processes_follows_the_option_else_the_events_up_to_the_cores() -> None:
    options = WriteOptions.from_options(BASE)
    cores = len(os.sched_getaffinity(0))
    four = {p: EVENTS_PER_PROCESS for p in "0123"}
    assert commit_processes(options, {"0": 10, "1": 10}) == 1
    assert commit_processes(options, four) == min(cores, 4)
    assert commit_processes(options, {"0": 4 * EVENTS_PER_PROCESS}) == 1  # one partition: one publisher
    chosen = WriteOptions.from_options({**BASE, "commitProcesses": "3"})
    assert chosen.commit_processes == 3
    assert commit_processes(chosen, {"0": 1, "1": 1}) == 2  # never more than the partitions with events
    assert commit_processes(chosen, four) == 3


def test_a_group_gets_the_runs_that_hold_its_partitions_cut_to_them() -> None:
    runs = [StagedRun("a", 0, {"0": (0, 5), "1": (5, 3)}), StagedRun("b", 1, {"1": (0, 2)}), StagedRun("", 2, {})]
    assert runs_of(runs, ["0"]) == [StagedRun("a", 0, {"0": (0, 5)})]
    assert runs_of(runs, ["1", "2"]) == [StagedRun("a", 0, {"1": (5, 3)}), StagedRun("b", 1, {"1": (0, 2)})]


CHILD = """
import os, sys, time
from airflow_provider_eh.spark.datasource.commit_processes import _end_with_parent
_end_with_parent(os.getppid())
print("armed", flush=True)
time.sleep(120)
"""
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "armed"
print(child.pid, flush=True)
import time; time.sleep(120)
"""


def test_a_commit_process_ends_when_the_process_that_started_it_is_killed() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        assert child.is_running()
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the commit process outlived its parent"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()
