"""An Airflow home and metadata DB of their own for DAG runs in child processes, as a new deployment's.

The test process's shared DB holds what other test files left (DAG bundles, DAGs, assets); an asset a
DAG declares, registered there earlier under other settings, would be inactive for these runs.

A new SQLite metadata DB is a copy of one migrated once per test process (:func:`copy_migrated_db`):
``airflow db migrate`` of an empty file writes the same tables, default pool and log templates every
time, and takes half a minute or more on a loaded 2-core machine each time.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

_TEMPLATE: list[Path] = []  # this process's migrated metadata DB, once made


def copy_migrated_db(target: Path) -> None:
    """Write a new, migrated SQLite metadata DB to ``target`` (a file that must not exist yet).

    A copy of one ``airflow db migrate`` of an empty file, made once in this process with this interpreter
    in a home of its own. What a new DB holds besides its tables (the default pool, the log templates)
    comes from settings the tests leave at Airflow's defaults; Airflow's unit test mode changes none of
    them, so one copy serves homes with it on or off.
    """
    if target.exists():
        raise FileExistsError(f"{target}: a new metadata DB's path must not exist yet")
    if not _TEMPLATE:
        home = Path(tempfile.mkdtemp(prefix="eh-tests-airflow-template-"))
        atexit.register(shutil.rmtree, home, True)
        db = home / "airflow.db"
        migrate_env = {k: v for k, v in os.environ.items()
                       if not k.startswith("AIRFLOW_CONN_") and k != "AIRFLOW__CORE__UNIT_TEST_MODE"}
        migrate_env.update({
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{db}",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        })
        migrated = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True,
                                  env=migrate_env, timeout=600)
        assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-3000:]
        _TEMPLATE.append(db)
    shutil.copyfile(_TEMPLATE[0], target)


def migrated_home(home: Path, dags: Path, extra_env: Mapping[str, str]) -> dict[str, str]:
    """Create ``home`` with a new migrated SQLite metadata DB (:func:`copy_migrated_db`), and return the
    environment of runs there.

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
    copy_migrated_db(home / "airflow.db")
    return env
