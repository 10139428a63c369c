"""Beside ``apache-airflow-providers-microsoft-azure`` (the normal case on Azure), ``wasb`` stays that provider's.

Airflow's providers managers are process-wide singletons that log while they discover providers, so
each check runs in a fresh interpreter and reads what it printed and logged.
"""

from __future__ import annotations

import json
import subprocess
import sys

# requirements/dev.lock installs the Azure provider: without it this must fail, not skip
import airflow.providers.microsoft.azure  # noqa: E402,F401
import pytest

_DISCOVER = """
import json, logging, sys, warnings
warnings.simplefilter("ignore")
handler = logging.StreamHandler(sys.stderr)
handler.setLevel(logging.WARNING)
logging.getLogger("airflow").addHandler(handler)
from airflow.providers_manager import ProvidersManager
from airflow.sdk import Connection
from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
conn = Connection(conn_id="blob", conn_type="wasb", extra={"connection_string": "UseDevelopmentStorage=true"})
print(json.dumps({
    "core": ProvidersManager().hooks["wasb"].hook_class_name,
    "task_runtime": ProvidersManagerTaskRuntime().hooks["wasb"].hook_class_name,
    "get_hook": type(conn.get_hook()).__name__,
    "event_hubs": ProvidersManagerTaskRuntime().hooks["azure_event_hubs"].hook_class_name,
    "providers": sorted(ProvidersManager().providers),
}))
"""


@pytest.fixture(scope="module")
def discovered() -> tuple[dict, str]:
    run = subprocess.run([sys.executable, "-c", _DISCOVER], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stdout + run.stderr


def test_no_connection_type_is_registered_twice_beside_the_azure_provider(discovered: tuple[dict, str]) -> None:
    found, output = discovered
    assert {"airflow-provider-eh", "apache-airflow-providers-microsoft-azure"} <= set(found["providers"])
    assert "has been already registered" not in output, output[-3000:]


def test_wasb_connections_get_the_azure_providers_hook_and_event_hubs_ours(discovered: tuple[dict, str]) -> None:
    found, _ = discovered
    wasb_hook = "airflow.providers.microsoft.azure.hooks.wasb.WasbHook"
    assert (found["core"], found["task_runtime"], found["get_hook"]) == (wasb_hook, wasb_hook, "WasbHook")
    assert found["event_hubs"] == "airflow_provider_eh.hooks.event_hubs.EventHubHook"
