"""An Airflow home and metadata DB of their own for DAG runs in child processes, as a new deployment's.

The test process's shared DB holds what other test files left (DAG bundles, DAGs, assets); an asset a
DAG declares, registered there earlier under other settings, would be inactive for these runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def migrated_home(home: Path, dags: Path, extra_env: Mapping[str, str]) -> dict[str, str]:
    """Create ``home``, migrate its SQLite metadata DB, and return the environment of runs there.

    :param home: the new Airflow home (created).
    :param dags: the DAGs folder of the runs.
    :param extra_env: what the DAGs read besides: their ``AIRFLOW_CONN_*`` variables, for instance.
    """
    home.mkdir()
    env = {
        **os.environ,
        **extra_env,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }
    migrated = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                              env=env, timeout=600)
    assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-3000:]
    return env
