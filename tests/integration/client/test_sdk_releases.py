"""The adapter's tests on every azure-eventhub release of the range ``pyproject.toml`` declares.

The suite runs on the dev environment's release; this runs the adapter's own tests (offline and
against the local endpoint), the fenced annotations' and the wire encoder's, in a small virtual
environment of each other release: that release of azure-eventhub installed alone (``uv``, no
dependencies), everything else (the checkout, the endpoint, pytest, the SDK's own dependencies)
from the dev environment through a ``.pth`` file placed after the venv's own site-packages.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import azure.eventhub
import pytest

REPO = Path(__file__).resolve().parents[3]
# every release on PyPI inside the declared range; a new one in range is added here
RELEASES = ("5.15.0", "5.15.1")
ADAPTER_TESTS = (
    "tests/unit/client/test_sdk_internals.py",
    "tests/integration/client/test_sdk_internals_endpoint.py",
    "tests/unit/client/test_fencing.py",
    "tests/unit/publishing/test_batching.py",
    "tests/unit/publishing/test_wire.py",
)


def _declared() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (spec,) = [d for d in project["dependencies"] if re.match(r"azure-eventhub\s*[<>=!~]", d)]
    return spec


def test_the_releases_tested_cover_the_declared_range() -> None:
    spec = _declared()
    low = re.search(r">=\s*([\d.]+)", spec)
    high = re.search(r"<\s*([\d.]+)", spec)
    assert low and high, spec
    assert low.group(1) in RELEASES, f"{spec}: its lowest release {low.group(1)} is not tested"
    assert azure.eventhub.__version__ in RELEASES, f"the dev environment's {azure.eventhub.__version__} is not listed"
    assert all(tuple(map(int, r.split("."))) < tuple(map(int, high.group(1).split("."))) for r in RELEASES)


def _venv(root: Path, release: str) -> Path:
    uv = Path(sys.executable).parent / "uv"
    venv = root / f"azure-eventhub-{release}"
    subprocess.run([str(uv), "venv", "-q", "-p", sys.executable, str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    run = subprocess.run([str(uv), "pip", "install", "-q", "-p", str(python), "--no-deps", f"azure-eventhub=={release}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the checkout (the provider, editable), the endpoint's source, then the dev environment's packages
    shared = [str(REPO), str(REPO / "endpoint"), sysconfig.get_path("purelib")]
    (Path(site) / "_eh_sdk_release_shared.pth").write_text("\n".join(shared) + "\n")
    return python


@pytest.mark.parametrize("release", [r for r in RELEASES if r != azure.eventhub.__version__])
def test_the_adapter_holds_on_every_release_in_range(release: str, tmp_path: Path) -> None:
    python = _venv(tmp_path, release)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PATH"] = os.pathsep.join([str(python.parent), str(Path(sys.executable).parent),
                                   str(REPO / "node_modules" / ".bin"), env.get("PATH", "")])
    found = subprocess.run([str(python), "-c", "import azure.eventhub, airflow_provider_eh.client.sdk_internals as s; "
                            "print(azure.eventhub.__version__, azure.eventhub.__file__, s.check())"],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    version, where, missing = found.stdout.split(" ", 2)
    assert version == release and Path(where).is_relative_to(python.parent.parent), found.stdout
    assert missing.strip() == "[]", f"azure-eventhub {release} lacks internals the adapter relies on: {missing}"
    run = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                          f"--basetemp={tmp_path / 'pytest'}", *ADAPTER_TESTS],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert run.returncode == 0, f"the adapter's tests on azure-eventhub {release}:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    assert re.search(r"\d+ passed", run.stdout) and "failed" not in run.stdout.splitlines()[-1], run.stdout[-2000:]
