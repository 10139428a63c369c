"""The client layer and the checkpoint reader and lag model import nothing above them."""

from __future__ import annotations

import json
import subprocess
import sys

LOWER = [
    "airflow_provider_eh.client.endpoint",
    "airflow_provider_eh.client.receive",
    "airflow_provider_eh.client.readback",
    "airflow_provider_eh.checkpoints.blob_layout",
    "airflow_provider_eh.checkpoints.lag",
]
ABOVE = ("airflow", "airflow_provider_eh.publishing", "airflow_provider_eh.ingest", "airflow_provider_eh.spark",
         "airflow_provider_eh.hooks", "airflow_provider_eh.operators", "airflow_provider_eh.sensors",
         "airflow_provider_eh.triggers")


def test_client_and_checkpoint_modules_import_no_airflow_and_no_engine() -> None:
    script = (
        "import importlib, json, sys\n"
        f"for name in {LOWER!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)
    above = [m for m in loaded if any(m == a or m.startswith(a + ".") for a in ABOVE)]
    assert above == [], f"the client layer or the checkpoint modules pulled in {above}"
