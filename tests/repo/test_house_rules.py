"""The house rules hold: ruff (lint, import order, docstrings) and mypy, as pyproject.toml configures
them and ``make lint`` runs them, find nothing; and each of them fails on a file that breaks a rule."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
CONFIG = REPO / "pyproject.toml"


def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``tool`` of the checkout's virtual environment, run in the checkout; its output in ``stdout``."""
    return subprocess.run([str(VENV_BIN / tool), *args], cwd=REPO, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit code {proc.returncode}\n{proc.stdout}{proc.stderr}"


def test_ruff_finds_nothing_in_the_package_dags_examples_scripts_and_benchmarks() -> None:
    proc = run("ruff", "check", "--no-cache")
    assert proc.returncode == 0, output(proc)


def test_mypy_finds_nothing_in_the_package() -> None:
    proc = run("mypy")
    assert proc.returncode == 0, output(proc)


def test_ruff_fails_on_unsorted_imports_and_a_public_function_without_a_docstring(tmp_path: Path) -> None:
    # D103 is not among ruff's default rules: finding it shows that pyproject.toml's settings apply
    module = tmp_path / "careless.py"
    module.write_text('"""A module."""\n\nimport sys\nimport os\n\n\ndef public() -> str:\n    return os.sep + sys.platform\n')
    proc = run("ruff", "check", "--no-cache", "--config", str(CONFIG), str(module))
    assert proc.returncode == 1, output(proc)
    assert "I001" in proc.stdout and "D103" in proc.stdout, output(proc)


def test_mypy_checks_untyped_functions_and_reports_unused_ignores(tmp_path: Path) -> None:
    # two kinds of finding the package had: a type error inside an untyped function, an ignore that hides nothing
    module = tmp_path / "careless.py"
    module.write_text('def untyped():\n    return 1 + "one"\n\n\ncount: int = 1  # type: ignore[assignment]\n')
    proc = run("mypy", "--config-file", str(CONFIG), "--cache-dir", "/dev/null", str(module))
    assert proc.returncode == 1, output(proc)
    assert "[operator]" in proc.stdout and "[unused-ignore]" in proc.stdout, output(proc)
