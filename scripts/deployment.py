"""`make deployment`: Airflow as production runs it, on this machine, from the provider's built wheel.

    python scripts/deployment.py up       # build the wheel, install it into .local/deployment/venv, start everything
    python scripts/deployment.py status   # what runs, with its PID
    python scripts/deployment.py down     # stop exactly what `up` started

`up` starts, each as a process of its own: a Postgres metadata database, a Redis broker, the
CeleryExecutor's two Celery workers, `airflow api-server`, `scheduler`, `dag-processor` and
`triggerer`, the local Event Hubs endpoint (hubs `orders` and `orders-live`, as the example DAGs expect,
and its Schema Registry over HTTPS with the group `orders` the example pipeline registers its schema in),
Azurite and a Spark standalone cluster (master and worker), with the example DAGs of `dags/`
(`tests.support.deployment`). It prints the UI's address and a login. Everything is
under `.local/deployment/`: each `up` starts from empty data (metadata, hub, blob storage); the virtual
environment is kept for the next `up` (only the provider is reinstalled), and `make clean` removes it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.deployment import Deployment, DeploymentError, build_wheel, install, print_summary  # noqa: E402

ROOT = REPO / ".local" / "deployment"
VENV = ROOT / "venv"
RUN = ROOT / "run"  # the deployment: Airflow home, logs, data, and the record of what runs


def up() -> int:
    """Build and install the wheel, start the deployment, print where it is."""
    if Deployment.load(RUN) is not None:
        print(f"a deployment is recorded in {RUN}: `make deployment-status`, or `make deployment-down` first")
        return 1
    shutil.rmtree(RUN, ignore_errors=True)  # a new deployment: new metadata, new hub, new blob state
    wheel = build_wheel(ROOT / "wheel")
    print(f"built {wheel.name}; installing it into {VENV} with requirements/dev.lock as constraints", flush=True)
    where = install(VENV, wheel)
    print(f"the deployment imports the provider from {where}", flush=True)
    deployment = Deployment(RUN, VENV)
    print("starting Postgres, Redis, Azurite, the Event Hubs endpoint, Spark and Airflow's components ...", flush=True)
    try:
        deployment.start()
    except DeploymentError as exc:
        print(f"the deployment did not start: {exc}", file=sys.stderr)
        return 1
    print_summary(deployment)
    return 0


def _recorded(otherwise: str) -> Deployment | None:
    """The deployment `up` recorded, or ``None`` after printing that there is none (and ``otherwise``)."""
    deployment = Deployment.load(RUN)
    if deployment is None:
        print(f"no deployment recorded{otherwise}")
    return deployment


def down() -> int:
    """Stop what `up` started (its PID records), nothing else."""
    deployment = _recorded(": nothing to stop")
    if deployment is None:
        return 0
    deployment.stop()
    print("deployment stopped")
    return 0


def status() -> int:
    """Each component, running (its PID) or not."""
    deployment = _recorded(" (make deployment starts one)")
    if deployment is None:
        return 0
    for name, pid in deployment.status().items():
        print(f"{name}: {f'running, pid {pid}' if pid else 'stopped'}")
    print_summary(deployment)
    return 0


def main(argv: list[str] | None = None) -> int:
    """The command line: ``up``, ``status`` or ``down``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "status", "down"])
    args = parser.parse_args(argv)
    return {"up": up, "status": status, "down": down}[args.command]()


if __name__ == "__main__":
    sys.exit(main())
