"""The suite's own check that a test file leaves nothing behind for the next file on its process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO

FILES = {
    "conftest.py": """
        import os, subprocess, pytest

        @pytest.fixture(scope="session")
        def service():
            os.environ["EH_HYGIENE_SESSION"] = "1"  # a session fixture's: the session's, not a leak
            proc = subprocess.Popen(["sleep", "60"])
            yield proc
            proc.kill()
    """,
    "test_a_leaks.py": """
        import os, subprocess

        def test_uses_the_service(service):
            assert service.poll() is None

        def test_leaks_a_variable_and_a_process():
            os.environ["EH_HYGIENE_PROBE"] = "left"
            subprocess.Popen(["sleep", "60"])
    """,
    "test_b_after.py": """
        import os, psutil

        def test_finds_nothing_left(service):
            assert "EH_HYGIENE_PROBE" not in os.environ
            assert os.environ["EH_HYGIENE_SESSION"] == "1"
            sleeping = [p for p in psutil.Process().children()
                        if p.name() == "sleep" and p.status() != psutil.STATUS_ZOMBIE]
            assert [p.pid for p in sleeping] == [service.pid]
    """,
}


def test_a_file_that_leaves_a_variable_or_a_process_gets_an_error_and_the_next_file_finds_neither(tmp_path: Path) -> None:
    for name, text in FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.support.hygiene", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "-q", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    out = proc.stdout
    assert "3 passed, 1 error" in out, out[-3000:]
    assert "ERROR at teardown of test_leaks_a_variable_and_a_process" in out
    assert "test_a_leaks.py left this behind for the next test file on this worker" in out
    assert "os.environ: set EH_HYGIENE_PROBE" in out and "still running (killed): pid" in out and "sleep 60" in out
    assert "EH_HYGIENE_SESSION" not in out  # what the session fixture set is the session's


def test_no_two_test_files_share_a_name() -> None:
    """The test folders are not packages: pytest imports each test file by its name alone, and a second
    file of the same name fails to collect ("import file mismatch"), on whichever process meets it second."""
    seen: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
