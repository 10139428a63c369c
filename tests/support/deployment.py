"""Airflow deployed as production runs it, on 127.0.0.1: every component a process of its own.

Postgres metadata, a Redis broker, ``CeleryExecutor`` with two Celery workers, ``airflow api-server``,
``scheduler``, ``dag-processor`` and ``triggerer``, the local Event Hubs endpoint (with its Schema
Registry over HTTPS, certificates of a private CA under ``<root>/tls``) and Azurite, a Spark
standalone cluster (a master and a worker, from the installed PySpark's ``spark-class``) that
``spark_default`` points at, the example DAGs. Airflow and the provider run from a virtual
environment of their own, into which the provider is installed from its built wheel (not the
checkout) with the pinned constraints (``requirements/dev.lock``). Workers reach Variables and connections only through the task
execution API, as on any Celery deployment.

Used by ``make deployment`` (``scripts/deployment.py``: up, status, down) and the deployment test.
Each process runs in a process group of its own, started with ``EH_DEPLOYMENT=<root>`` in its
environment; :meth:`Deployment.stop` (``make deployment-down``) ends exactly the groups whose leader
still carries that mark, and nothing else. The scheduler runs schedules, as in production: the
event-driven example's runs (asset-triggered and its safety run) are scheduled runs. DAGs are paused
when first parsed (Airflow's default): unpause what should run. The example pipeline's start date
(``EH_EXAMPLE_START_DATE``) is tomorrow, so unpausing it starts no catch-up; past days are backfilled
(``airflow backfill create``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from eventhubs_local import EmulatorAdmin
from eventhubs_local.azurite import command as azurite_command
from eventhubs_local.azurite import connection_string as azurite_connection_string
from eventhubs_local.launcher import command as event_hubs_command
from eventhubs_local.launcher import connection_string as event_hubs_connection_string
from eventhubs_local.ports import free_port

from tests.support.databases import postgres_database, start_postgres
from tests.support.stack import SCHEMA_GROUPS, example_env
from tests.support.standalone import AirflowApi, StandaloneError, standalone_env
from tests.support.tls import make_certificates

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
MARK = "EH_DEPLOYMENT"
USER = "admin"
# The example DAGs' hubs: eh_daily_orders publishes to orders, eh_on_new_orders watches orders-live
# (without it the watcher's trigger fails and restarts in a loop in the triggerer).
HUBS = {"orders": 4, "orders-live": 2}
CONSUMER_GROUPS = {"orders": ["analytics", "lakehouse"], "orders-live": ["airflow-watcher"]}
KEY_NAME, KEY = "local", "local"
WORKERS = ("worker-1", "worker-2")
SPARK_WORKER = {"cores": "2", "memory": "2g"}  # what the Spark worker offers the Spark jobs of the tasks
# One slot: runs of a producer group on the Variables backend are serialised (Variables have no compare-and-swap).
VARIABLE_STATE_POOL = "eh_variable_state"
# What the deployment installs beside the wheel: the executor, the broker's client, the metadata
# database's driver, and the providers the example DAGs and Azure deployments use.
PACKAGES = (
    "apache-airflow-providers-celery", "redis", "apache-airflow-providers-postgres", "psycopg2-binary",
    "apache-airflow-providers-sqlite", "apache-airflow-providers-microsoft-azure",
)
# Settings beyond airflow standalone's (testing.standalone.standalone_env), each bounding how long a
# lost process's work waits: the executor; a lost worker's running task failed (and retried) 30 s
# after its last heartbeat instead of 5 minutes; a task queued to a worker that died before starting
# it (Celery acknowledges late, so the broker hands its message out again only after the visibility
# timeout, a day) requeued 90 s after it was queued instead of 10 minutes; and the tasks of a
# scheduler that died without ending its job adopted by the next one within 40 s of that job's last
# heartbeat instead of 5 minutes (until then no scheduler fails them for their missing heartbeats):
# the job counts as dead 30 s after its last heartbeat, and the next scheduler looks for orphans at
# its start (too early after a crash) and then every 10 s.
SETTINGS = {
    "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
    "AIRFLOW__CORE__PARALLELISM": "8",
    "AIRFLOW__CELERY__WORKER_CONCURRENCY": "2",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
    "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "90",
    "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "10",
    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "10",
    "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "True",
    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
}


class DeploymentError(StandaloneError):
    """A component did not start, exited, or the deployment was not installed; the message names it."""


def build_wheel(out: Path) -> Path:
    """Build the provider's wheel from the checkout into ``out``, and the local endpoint's beside it
    (:func:`install` installs both); the provider wheel's path."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("airflow_provider_eh-*.whl"), *out.glob("eventhubs_local-*.whl")]:
        old.unlink()
    for source in (REPO, REPO / "endpoint"):
        run = subprocess.run([_uv(), "build", "--wheel", "-q", "-o", str(out), str(source)], capture_output=True,
                             text=True, timeout=600)
        if run.returncode != 0:
            raise DeploymentError(f"building the wheel of {source} failed:\n{run.stderr[-3000:]}")
    (wheel,) = out.glob("airflow_provider_eh-*.whl")
    return wheel


def install(venv: Path, wheel: Path, constraints: Path = REPO / "requirements" / "dev.lock",
            share: Path | None = None) -> Path:
    """Install ``wheel`` into the virtual environment ``venv``; the path the provider is imported from there.

    Without ``share``: the wheel with its ``spark`` extra and :data:`PACKAGES`, under ``constraints``
    (the pinned versions). A virtual environment that exists is reused: only the provider is
    reinstalled from the wheel, the rest is already at the pinned versions.

    With ``share`` (the ``site-packages`` of an environment installed from the same ``constraints``,
    the checkout's ``.venv`` in the test suite): the third-party packages are that folder's, put on
    ``sys.path`` after ``venv``'s own by a ``.pth`` line (its own ``.pth`` files, among them the
    checkout's editable install, are not run), and only the provider is installed into ``venv``,
    from the wheel, without dependencies. A second full install costs the suite minutes and gigabytes.

    Either way it checks that the provider is imported from inside ``venv``, not from the checkout.
    """
    python = venv / "bin" / "python"
    endpoint = [str(w) for w in wheel.parent.glob("eventhubs_local-*.whl")]  # build_wheel's, beside the provider's
    if not python.exists():
        subprocess.run([_uv(), "venv", "-q", "-p", sys.executable, str(venv)], check=True, capture_output=True)
    if share is None:
        command = ["--constraint", str(constraints), "--reinstall-package", "airflow-provider-eh",
                   "--reinstall-package", "eventhubs-local", f"{wheel}[spark,schemaregistry,deltalake]", *endpoint,
                   *PACKAGES]
    else:
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        (site / "_eh_deployment_shared.pth").write_text(f"{share}\n")
        command = ["--no-deps", "--reinstall-package", "airflow-provider-eh", "--reinstall-package", "eventhubs-local",
                   str(wheel), *endpoint]
        airflow = venv / "bin" / "airflow"  # the console script lives in the shared environment's bin
        airflow.write_text(f"#!{python}\nimport sys\nfrom airflow.__main__ import main\nsys.exit(main())\n")
        airflow.chmod(0o755)
    run = subprocess.run([_uv(), "pip", "install", "-q", "-p", str(python), *command], capture_output=True, text=True,
                         timeout=1200)
    if run.returncode != 0:
        raise DeploymentError(f"installing {wheel.name} into {venv} failed:\n{run.stderr[-3000:]}")
    where = subprocess.run(
        [str(python), "-c", "import airflow_provider_eh; print(airflow_provider_eh.__file__)"],
        capture_output=True, text=True, check=True, cwd=venv, env=_clean_env(os.environ),
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(venv.resolve()):
        raise DeploymentError(f"the deployment's Python imports the provider from {where}, not from {venv}")
    return Path(where)


def _uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if not found:
        raise DeploymentError("uv not found: run `make venv` (it installs uv into .venv)")
    return found


def _clean_env(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` without Airflow's settings, the checkout on ``PYTHONPATH`` or another virtual environment's."""
    return {
        key: value for key, value in base.items()
        if not key.startswith(("AIRFLOW", "EH_")) and key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")
    }


@dataclass
class Component:
    """One process of the deployment: its name, command line, extra environment, and its process once started."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    proc: subprocess.Popen | None = None


class Deployment:
    """The deployment rooted at ``root`` (its Airflow home, logs, data, PID records and state file).

    :param root: the folder of everything it writes.
    :param venv: the virtual environment Airflow and the provider run from (:func:`install`).
    :param metadata_db: an SQLAlchemy URL of an empty Postgres database; ``None``: a Postgres server
        of its own is started (its data in a temporary folder the server's user can reach).
    :param dag_files: DAG files copied into its DAGs folder beside the example DAGs of ``dags/``.
    :param worker_env: extra environment of the Celery workers (crash points of a test, say).
    :param spark_worker_env: extra environment of the Spark worker, which its executors and their
        Python workers inherit.
    :param settings: extra environment of every Airflow component (``EH_EXAMPLE_SAFETY_SCHEDULE``, say).
    """

    def __init__(self, root: Path, venv: Path, *, metadata_db: str | None = None, dag_files: Sequence[Path] = (),
                 worker_env: Mapping[str, str] | None = None, spark_worker_env: Mapping[str, str] | None = None,
                 settings: Mapping[str, str] | None = None):
        self.root, self.venv, self.metadata_db = root, venv, metadata_db
        self.settings = dict(settings or {})
        self.dag_files = list(dag_files)
        self.worker_env = dict(worker_env or {})
        self.spark_worker_env = dict(spark_worker_env or {})
        self.home = root / "airflow"
        self.state_file = root / "deployment.json"
        self.components: dict[str, Component] = {}
        self.env: dict[str, str] = {}
        self.ports: dict[str, int] = {}
        self.password = ""
        self.postgres_data: str | None = None
        self.api: AirflowApi | None = None

    # -- start ---------------------------------------------------------------------------------------

    def start(self, timeout: float = 420) -> None:
        """Start every component and wait until the API server answers, the scheduler, DAG processor and
        triggerer report healthy and both workers are ready; then create the Variables backend's pool."""
        if self.state_file.exists():
            raise DeploymentError(f"a deployment is recorded in {self.state_file}: stop it first (make deployment-down)")
        for folder in ("logs", "dags", "data", "event-hubs", "azurite", "redis", "spark", "tls"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)
        for path in (REPO / "dags").iterdir():
            if path.is_file():
                shutil.copy2(path, self.root / "dags" / path.name)
        for path in self.dag_files:
            shutil.copy2(path, self.root / "dags" / path.name)
        self.ports = {name: free_port() for name in ("api", "redis", "event_hubs", "event_hubs_admin", "registry",
                                                     "azurite", "spark", "spark_ui", "spark_worker_ui")}
        self.password = secrets.token_urlsafe(12)
        (self.home / "passwords.json").write_text(json.dumps({USER: self.password}))
        deadline = time.monotonic() + timeout
        try:
            self._start_services()
            self.env = self._airflow_env()
            self._save()
            migrate = subprocess.run([self._airflow(), "db", "migrate"], env=self.env, cwd=self.root, capture_output=True,
                                     text=True, timeout=max(60.0, deadline - time.monotonic()))
            if migrate.returncode != 0:
                raise DeploymentError(f"airflow db migrate failed:\n{migrate.stdout[-2000:]}{migrate.stderr[-3000:]}")
            for name, argv in (("api-server", ["api-server"]), ("scheduler", ["scheduler"]),
                               ("dag-processor", ["dag-processor"]), ("triggerer", ["triggerer"])):
                self._spawn(Component(name, [self._airflow(), *argv]))
            for name in WORKERS:
                self._spawn(self.worker(name))
            self._save()
            self._wait_ready(deadline)
            created = self.api_client().post("/pools", json={
                "name": VARIABLE_STATE_POOL, "slots": 1,
                "description": "One run at a time of a producer group on the Variables state backend"})
            if created.status_code not in (200, 201, 409):
                raise DeploymentError(f"creating pool {VARIABLE_STATE_POOL} failed: {created.status_code} {created.text}")
        except BaseException:
            self.stop()
            raise

    def _start_services(self) -> None:
        if self.metadata_db is None:
            data = Path(tempfile.mkdtemp(prefix="eh-deployment-postgres-"))  # the server's user must reach it
            self.postgres_data = str(data)
            started = start_postgres(data, detached=True, env={**os.environ, MARK: str(self.root)})
            if started is None:
                raise DeploymentError("no Postgres server installed: make prerequisites (Debian's postgresql)")
            proc, dsn = started
            self.components["postgres"] = Component("postgres", ["postgres", "-D", str(data / "db")], pid=proc.pid, proc=proc)
            self.metadata_db = postgres_database(dsn, "airflow")
        redis = shutil.which("redis-server") or "/usr/bin/redis-server"
        self._spawn(Component("redis", [redis, "--port", str(self.ports["redis"]), "--bind", HOST, "--save", "",
                                        "--appendonly", "no", "--dir", str(self.root / "redis")]))
        self._spawn(Component("azurite", azurite_command(HOST, self.ports["azurite"], self.root / "azurite")))
        tls = make_certificates(self.root / "tls", days=30)  # the registry's; the connection trusts its CA
        endpoint = event_hubs_command(
            self.root / "event-hubs", host=HOST, port=self.ports["event_hubs"], admin_port=self.ports["event_hubs_admin"],
            hubs=HUBS, consumer_groups=CONSUMER_GROUPS, key_name=KEY_NAME, key=KEY,
            tls=(tls.cert, tls.key), registry_port=self.ports["registry"], schema_groups=SCHEMA_GROUPS,
        )
        self._spawn(Component("event-hubs", [str(self.venv / "bin" / "python"), *endpoint[1:]]))  # from the wheel
        spark_home = self._spark_home()
        spark_class = str(spark_home / "bin" / "spark-class")
        spark_env = {"SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": HOST}
        self._spawn(Component("spark-master", [
            spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(self.ports["spark"]),
            "--webui-port", str(self.ports["spark_ui"])], spark_env))
        self._spawn(Component("spark-worker", [
            spark_class, "org.apache.spark.deploy.worker.Worker", "--host", HOST, "--cores", SPARK_WORKER["cores"],
            "--memory", SPARK_WORKER["memory"], "--webui-port", str(self.ports["spark_worker_ui"]),
            "--work-dir", str(self.root / "spark"), self.spark_master], {**spark_env, **self.spark_worker_env}))
        deadline = time.monotonic() + 120
        services = ("redis", "azurite", "event-hubs", "spark-master", "spark-worker")
        while not (self._endpoint_healthy() and "Successfully registered with master" in self._tail("spark-worker", 20000)):
            self._check_alive(*services)
            if time.monotonic() > deadline:
                raise DeploymentError("the Event Hubs endpoint or the Spark worker was not ready in 120 s:\n"
                                      f"{self._tail('event-hubs')}\n{self._tail('spark-worker')}")
            time.sleep(0.3)

    def _spark_home(self) -> Path:
        """The Spark distribution inside the deployment's PySpark (its ``bin/spark-class``)."""
        found = subprocess.run(
            [str(self.venv / "bin" / "python"), "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
            capture_output=True, text=True, env=_clean_env(os.environ), cwd=self.venv,
        )
        if found.returncode != 0:
            raise DeploymentError(f"PySpark is not installed in {self.venv} (the wheel's spark extra):\n{found.stderr[-2000:]}")
        return Path(found.stdout.strip())

    def _endpoint_healthy(self) -> bool:
        try:
            return self.event_hubs_admin().health()
        except OSError:  # not listening yet
            return False

    def _airflow_env(self) -> dict[str, str]:
        base = _clean_env(os.environ)
        env = standalone_env(self.home, self.ports["api"], base, metadata_db=self.metadata_db)
        env.update(example_env(
            self.root / "example.db", self.root / "data", event_hubs=self.event_hubs_connection_string(),
            blob=azurite_connection_string(HOST, self.ports["azurite"]), spark_master=self.spark_master,
            schema_registry=(self.schema_registry_namespace, self.root / "tls" / "ca.pem"),
        ))
        env.update(SETTINGS)
        assert self.metadata_db is not None
        env.update({
            MARK: str(self.root),
            "PATH": f"{self.venv / 'bin'}{os.pathsep}{base.get('PATH', '')}",
            "PYSPARK_PYTHON": str(self.venv / "bin" / "python"),
            "SPARK_LOCAL_IP": HOST,  # a task's Spark driver listens where the cluster's executors reach it
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.root / "dags"),
            "AIRFLOW__CORE__FERNET_KEY": _fernet_key(),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
            "AIRFLOW__CELERY__BROKER_URL": f"redis://{HOST}:{self.ports['redis']}/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.metadata_db.replace("postgresql+psycopg2://", "postgresql://", 1),
            "EH_EXAMPLE_NAMESPACE": f"{HOST}:{self.ports['event_hubs']}",
            "EH_EXAMPLE_START_DATE": str(datetime.now(UTC).date() + timedelta(days=1)),
        })
        env.update(self.settings)
        return env

    def worker(self, name: str, extra_env: Mapping[str, str] | None = None) -> Component:
        """The Celery worker ``name`` (its own hostname and log server port), with :attr:`worker_env` and ``extra_env``."""
        return Component(
            name, [self._airflow(), "celery", "worker", "--celery-hostname", f"{name}@%h"],
            {"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()), **self.worker_env, **(extra_env or {})},
        )

    def _airflow(self) -> str:
        return str(self.venv / "bin" / "airflow")

    def _spawn(self, component: Component) -> None:
        log = self.root / "logs" / f"{component.name}.log"
        env = {**(self.env or {**_clean_env(os.environ), MARK: str(self.root)}), **component.env}
        with open(log, "ab") as out:
            component.proc = subprocess.Popen(component.argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, cwd=self.root, start_new_session=True)
        component.pid = component.proc.pid
        self.components[component.name] = component

    def _wait_ready(self, deadline: float) -> None:
        """Wait until the API answers a login, its health check reports every component healthy and each worker is ready."""
        api = self.api_client()
        waiting = "the API server"
        while True:
            self._check_alive(*self.components)
            try:
                api.login()
                health = api.get("/monitor/health").json()
                unhealthy = [name for name in ("metadatabase", "scheduler", "triggerer", "dag_processor")
                             if (health.get(name) or {}).get("status") != "healthy"]
                not_ready = [name for name in WORKERS if " ready." not in self._tail(name, 20000)]
                if not unhealthy and not not_ready:
                    return
                waiting = f"{', '.join(unhealthy + not_ready)} to be ready"
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise DeploymentError(f"waited in vain for {waiting}; logs in {self.root / 'logs'}")
            time.sleep(2)

    # -- using it ------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The UI's and the REST API's address."""
        return f"http://{HOST}:{self.ports['api']}"

    @property
    def spark_master(self) -> str:
        """The Spark standalone master's URL (``spark_default``'s host)."""
        return f"spark://{HOST}:{self.ports['spark']}"

    def api_client(self) -> AirflowApi:
        """The REST client (``/api/v2``), logged in as the deployment's admin on first use."""
        if self.api is None:
            self.api = _DeploymentApi(self)
        return self.api

    def event_hubs_connection_string(self, hub: str | None = None) -> str:
        return event_hubs_connection_string(HOST, self.ports["event_hubs"], KEY_NAME, KEY, hub)

    def event_hubs_admin(self) -> EmulatorAdmin:
        return EmulatorAdmin(f"http://{HOST}:{self.ports['event_hubs_admin']}")

    @property
    def schema_registry_namespace(self) -> str:
        """``host:port`` of the endpoint's Schema Registry (HTTPS; its CA is ``<root>/tls/ca.pem``)."""
        return f"{HOST}:{self.ports['registry']}"

    def airflow(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run the deployment's ``airflow`` command line (``backfill create ...``), as an operator would."""
        return subprocess.run([self._airflow(), *args], env=self.env, cwd=self.root, capture_output=True, text=True,
                              timeout=timeout)

    def kill(self, name: str) -> None:
        """SIGKILL component ``name``, its process group and every process under it (a worker's task
        supervisors, and their task processes, which Airflow puts in process groups of their own)."""
        self._end(self.components[name], signal.SIGKILL, grace=0)

    def restart(self, name: str, extra_env: Mapping[str, str] | None = None) -> None:
        """Stop component ``name`` (SIGTERM, its group SIGKILLed after 30 s) and start it again; a worker with ``extra_env``."""
        old = self.components[name]
        self._end(old, signal.SIGTERM, grace=30)
        self._spawn(self.worker(name, extra_env) if name in WORKERS else Component(name, old.argv, old.env))
        self._save()

    def worker_running(self, ti_id: str) -> str | None:
        """The Celery worker whose task process runs task instance ``ti_id`` now (the task SDK titles that
        process ``airflow worker -- <id>``), or ``None``."""
        for name in WORKERS:
            component = self.components.get(name)
            for pid in _tree(component.pid) if component is not None and component.pid is not None else ():
                try:
                    title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if f"airflow worker -- {ti_id}" in title:
                    return name
        return None

    def component_of(self, pid: int) -> str | None:
        """The component process ``pid`` runs under (a task process: the worker that runs it), or ``None``."""
        for name, component in self.components.items():
            if component.pid is not None and pid in _tree(component.pid):
                return name
        return None

    # -- stop ----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """End every component this deployment started (workers and Airflow's first, the services last)."""
        if self.api is not None:
            self.api.close()
        airflow = [c for c in self.components.values() if c.argv[0] == self._airflow()]
        self._end_all(airflow, signal.SIGTERM, grace=20)  # Airflow's components together, then the services they use
        for component in reversed([c for c in self.components.values() if c not in airflow]):
            self._end(component, signal.SIGTERM, grace=20)
        if self.postgres_data:
            shutil.rmtree(self.postgres_data, ignore_errors=True)
        self.state_file.unlink(missing_ok=True)

    def _end(self, component: Component, signum: int, grace: float) -> None:
        self._end_all([component], signum, grace)

    def _end_all(self, components: Sequence[Component], signum: int, grace: float) -> None:
        """Send ``signum`` to these components' process groups at once, wait up to ``grace`` seconds for
        them to exit, then SIGKILL what is left of each group and of every process under its leader."""
        ours = [c for c in components if c.pid is not None and _ours(c.pid, self.root)]
        trees = {id(c): _tree(c.pid) for c in ours if c.pid is not None}  # before a leader dies and its children move to init
        for component in ours:
            assert component.pid is not None
            _signal_group(component.pid, signum)
        deadline = time.monotonic() + grace
        while any(_group_alive(c) for c in ours) and time.monotonic() < deadline:
            time.sleep(0.2)
        for component in ours:
            assert component.pid is not None
            _signal_group(component.pid, signal.SIGKILL)
            for pid in trees[id(component)]:
                _signal_group(pid, signal.SIGKILL)  # a task process's own process group
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        while any(_group_alive(c) for c in ours):
            time.sleep(0.1)

    def _check_alive(self, *names: str) -> None:
        for name in names:
            proc = self.components[name].proc
            if proc is not None and proc.poll() is not None:
                raise DeploymentError(f"{name} exited with code {proc.returncode}:\n{self._tail(name)}")

    def _tail(self, name: str, chars: int = 3000) -> str:
        try:
            return (self.root / "logs" / f"{name}.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # -- the record make deployment-down reads --------------------------------------------------------

    def _save(self) -> None:
        record = {
            "venv": str(self.venv), "ports": self.ports, "password": self.password, "postgres_data": self.postgres_data,
            "metadata_db": self.metadata_db, "env": self.env,
            "components": {c.name: {"argv": c.argv, "env": c.env, "pid": c.pid} for c in self.components.values()},
        }
        self.state_file.write_text(json.dumps(record, indent=1))
        self.state_file.chmod(0o600)

    @classmethod
    def load(cls, root: Path) -> Deployment | None:
        """The deployment recorded in ``root`` (by :meth:`start`), or ``None``."""
        try:
            record = json.loads((root / "deployment.json").read_text())
        except (OSError, ValueError):
            return None
        deployment = cls(root, Path(record["venv"]), metadata_db=record["metadata_db"])
        deployment.ports, deployment.password = record["ports"], record["password"]
        deployment.postgres_data, deployment.env = record["postgres_data"], record["env"]
        deployment.components = {name: Component(name, c["argv"], c["env"], c["pid"])
                                 for name, c in record["components"].items()}
        return deployment

    def status(self) -> dict[str, int | None]:
        """Each component's PID, or ``None`` where it no longer runs."""
        return {name: (c.pid if c.pid is not None and _ours(c.pid, self.root) else None)
                for name, c in self.components.items()}


class _DeploymentApi(AirflowApi):
    """The REST client of a deployment: fails fast when a component has exited, shows the scheduler's log."""

    def __init__(self, deployment: Deployment):
        super().__init__(deployment.url, deployment.home, (USER, deployment.password))
        self.deployment = deployment

    def check_alive(self) -> None:
        self.deployment._check_alive(*self.deployment.components)

    def _api(self) -> httpx.Client:
        if self.client is None:  # a deployment loaded from its record (make deployment's) logs in on first use
            self.login()
        return super()._api()

    def tail(self, chars: int = 5000) -> str:
        return self.deployment._tail("scheduler", chars)


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def _ours(pid: int, root: Path) -> bool:
    """Whether process ``pid`` is one this deployment started (not a process that reused the PID): it
    runs with the deployment's mark in its environment, or in a folder of the deployment (Redis
    overwrites its environment with its process title)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False
    return f"{MARK}={root}".encode() in environ or cwd.is_relative_to(root.resolve())


def _tree(pid: int) -> set[int]:
    """Process ``pid`` and all its descendants (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children.get(current, []))
    return found


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(component: Component) -> bool:
    if component.proc is not None:
        component.proc.poll()  # reap our own child, or the group never looks empty
    assert component.pid is not None
    try:
        os.killpg(component.pid, 0)
    except ProcessLookupError:
        return False
    if component.proc is None:  # a group of another session's start (make deployment-down): its zombies are not ours to reap
        try:
            state = Path(f"/proc/{component.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        return state != "Z"
    return True


def print_summary(deployment: Deployment) -> None:
    """What ``make deployment`` prints: the UI's address, the login, what runs where, and how to stop it."""
    ports = deployment.ports
    print(f"Airflow UI and REST API: {deployment.url}  (login: {USER} / {deployment.password})")
    print(f"Airflow home: {deployment.home}; logs: {deployment.root / 'logs'}; DAGs: {deployment.root / 'dags'}")
    print(f"metadata: {deployment.metadata_db}")
    print(f"Celery broker: redis://{HOST}:{ports['redis']}/0; workers: {', '.join(WORKERS)}")
    print(f"Event Hubs endpoint: {HOST}:{ports['event_hubs']} (admin {HOST}:{ports['event_hubs_admin']}, "
          f"Schema Registry https://{deployment.schema_registry_namespace}, CA {deployment.root / 'tls' / 'ca.pem'}); "
          f"Azurite: {HOST}:{ports['azurite']}")
    print(f"Spark master: {deployment.spark_master} (UI http://{HOST}:{ports['spark_ui']}), "
          f"one worker of {SPARK_WORKER['cores']} cores and {SPARK_WORKER['memory']}")
    print(f"Airflow's command line there: AIRFLOW_HOME={deployment.home} {deployment.venv / 'bin' / 'airflow'} "
          f"(with the environment in {deployment.state_file})")
    print("DAGs are paused until unpaused (UI toggle); eh_daily_orders starts tomorrow: fill past days with "
          "airflow backfill create --dag-id eh_daily_orders --from-date ... --to-date ...")
    print("stop it: make deployment-down")
