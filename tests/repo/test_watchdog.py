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
