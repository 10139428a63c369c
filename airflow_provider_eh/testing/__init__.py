"""Helpers for testing your own DAGs that use this provider, without Azure.

- :func:`~airflow_provider_eh.testing.crash.crash_at`, :func:`~airflow_provider_eh.testing.crash.pause_at`
  and :func:`~airflow_provider_eh.testing.crash.crash_at_from_env`: SIGKILL or pause a process at one
  step of the publish or ingest protocol, to prove that a retry publishes each event once;
- :func:`~airflow_provider_eh.testing.dag_test.run_dag` (``dag.test()`` for a DAG whose file is outside
  the configured DAGs folder), :func:`~airflow_provider_eh.testing.dag_test.when` and the other helpers of
  :mod:`~airflow_provider_eh.testing.dag_test`: act beside a running ``dag.test()``, report a failed run;
- :func:`~airflow_provider_eh.client.readback.read_hub` and
  :func:`~airflow_provider_eh.client.readback.duplicates`: read a hub back and count what landed;
- ``EmulatorProcess`` (the local Event Hubs endpoint) and ``AzuriteProcess`` (Azurite's blob service)
  as child processes of a test, from the ``eventhubs-local`` distribution that the ``testing`` extra
  installs (``pip install "airflow-provider-eh[testing]"``); it also brings pytest fixtures.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_eh.client.readback import duplicates, read_hub
from airflow_provider_eh.testing.crash import crash_at, crash_at_from_env, pause_at
from airflow_provider_eh.testing.dag_test import failure_report, run_dag, when

_LOCAL_ENDPOINT = {"EmulatorProcess": "eventhubs_local", "AzuriteProcess": "eventhubs_local.azurite"}

__all__ = ["AzuriteProcess", "EmulatorProcess", "crash_at", "crash_at_from_env", "duplicates", "failure_report",
           "pause_at", "read_hub", "run_dag", "when"]


def __getattr__(name: str) -> Any:
    """The local endpoint's launchers, imported when first asked for: the ``testing`` extra installs them."""
    if name not in _LOCAL_ENDPOINT:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    try:
        module = importlib.import_module(_LOCAL_ENDPOINT[name])
    except ImportError as exc:
        raise ImportError(f"{name} comes from the eventhubs-local distribution: "
                          f'pip install "airflow-provider-eh[testing]"') from exc
    return getattr(module, name)
