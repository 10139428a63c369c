"""The wheel built from the checkout carries what a user installing it needs: the license, the type
marker, the provider entry point, and only dependencies the package uses."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    command = [uv, "build", "--wheel", "-o", str(out), str(REPO)] if uv else [sys.executable, "-m", "build", "--wheel", "-o", str(out), str(REPO)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    (path,) = out.glob("airflow_provider_eh-*.whl")
    return zipfile.ZipFile(path)


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (found,) = [n for n in wheel.namelist() if ".dist-info/" in n and n.endswith(name)]
    return wheel.read(found).decode()


def test_wheel_carries_the_apache_license_text_and_the_py_typed_marker(wheel: zipfile.ZipFile) -> None:
    license_text = _dist_info(wheel, "LICENSE")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert "airflow_provider_eh/py.typed" in wheel.namelist()


def test_wheel_registers_the_provider_and_declares_no_unused_checkpoint_store(wheel: zipfile.ZipFile) -> None:
    assert "provider_info = airflow_provider_eh.get_provider_info:get_provider_info" in _dist_info(wheel, "entry_points.txt")
    requires = [line.split(":", 1)[1].strip() for line in _dist_info(wheel, "METADATA").splitlines() if line.startswith("Requires-Dist:")]
    assert not [r for r in requires if r.startswith("azure-eventhub-checkpointstoreblob-aio")]


def test_wheel_registers_the_event_hubs_view_plugin_and_carries_its_static_files(wheel: zipfile.ZipFile) -> None:
    entry_points = _dist_info(wheel, "entry_points.txt")
    section = entry_points.split("[airflow.plugins]", 1)[1].split("\n[", 1)[0]
    assert "azure_event_hubs_view = airflow_provider_eh.plugins.event_hubs_view:EventHubsViewPlugin" in section
    names = set(wheel.namelist())
    for name in ("view.html", "view.js", "view.css"):
        assert f"airflow_provider_eh/plugins/static/{name}" in names
        assert wheel.read(f"airflow_provider_eh/plugins/static/{name}") == (REPO / "airflow_provider_eh/plugins/static" / name).read_bytes()
