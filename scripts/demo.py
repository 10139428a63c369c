"""`make demo`: the example pipeline end to end on the local stack.

Starts Azurite and the local Event Hubs endpoint (left running; `make services-down` stops them),
prepares an Airflow home under `.airflow/`, and runs the example DAGs with `airflow dags test`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_provider_eh.testing import stack  # noqa: E402

AIRFLOW_HOME = REPO / ".airflow"


def airflow_env() -> dict[str, str]:
    return {
        **os.environ,
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        **stack.connection_env(),
    }


def airflow(*args: str, quiet: bool = False) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "airflow", *args], env=airflow_env(), cwd=REPO, text=True, capture_output=True
    )
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:], sep="\n")
        raise SystemExit(f"`airflow {' '.join(args)}` failed with exit code {result.returncode}")
    if not quiet:
        print(result.stdout)
    return result.stdout


def main() -> None:
    print("== starting the local stack (Azurite, local Event Hubs endpoint) on 127.0.0.1")
    stack.up()
    print(f"== preparing Airflow in {AIRFLOW_HOME}")
    AIRFLOW_HOME.mkdir(exist_ok=True)
    airflow("db", "migrate", quiet=True)
    print("== eh_quickstart: what the hub holds")
    airflow("dags", "test", "eh_quickstart", "2026-01-01")
    print("The local stack keeps running; `make services-down` stops it.")


if __name__ == "__main__":
    main()
