"""The suite's own check that a test stuck past its timeout ends its worker with the stacks of where it hung."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

STUCK = '''
import signal, time, pytest

@pytest.mark.timeout(2)
def test_stuck_after_a_dag_import():
    signal.setitimer(signal.ITIMER_REAL, 0)  # as Airflow's DAG importer leaves it: pytest-timeout's alarm disarmed
    time.sleep(600)

def test_next():
    pass
'''


def test_a_test_stuck_where_pytest_timeout_cannot_reach_fails_with_its_stack_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_stuck.py").write_text(STUCK)
    env = {**os.environ, "PYTHONPATH": str(REPO), "EH_WATCHDOG_GRACE": "3"}
    env.pop("EH_WATCHDOG_DIR", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.watchdog", "-p", "no:cacheprovider",
                           "-n", "1", "-q", "-o", "timeout_method=signal", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "1 failed, 1 passed" in out, out[-3000:]
    assert "watchdog: watchdog-gw0.txt" in out, out[-3000:]
    assert "test_stuck.py::test_stuck_after_a_dag_import ran" in out and "past its timeout plus 3 s" in out
    assert 'line 7 in test_stuck_after_a_dag_import' in out, out[-3000:]  # the stuck line, from the stack dump


QUICK = """
import time

def test_one():
    time.sleep(0.2)

def test_two():
    time.sleep(0.2)
"""
CRASHING = """
import os, pathlib

def test_before():
    pass

def test_crash():
    with pathlib.Path(__file__).with_name("ran").open("a") as ran:
        ran.write("crash\\n")
    os._exit(70)  # the worker ends mid-test, as the watchdog or a stray SIGKILL ends it

def test_after():
    pass
"""


def test_a_run_on_two_workers_goes_on_after_one_ended_mid_test_and_does_not_run_that_test_again(tmp_path: Path) -> None:
    for n in range(6):
        (tmp_path / f"test_quick_{n}.py").write_text(QUICK)
    (tmp_path / "test_quick_2.py").write_text(CRASHING)
    (tmp_path / "test_quick_5.py").write_text(CRASHING.replace("test_before", "test_first"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.xdist_schedule", "-p", "no:cacheprovider",
                           "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", "-q", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    out = proc.stdout + proc.stderr
    assert "2 failed, 12 passed" in out, out[-3000:]  # every test reported: the two crashed, the rest run
    assert (tmp_path / "ran").read_text() == "crash\n" * 2, out[-3000:]  # neither crashed test ran twice
