"""Project-wide fixtures: an isolated Airflow home, and the local stack started once per session.

Airflow reads its configuration when first imported, so the environment is set here, at the top
of the first conftest, before any test module imports Airflow.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from tests.support import databases, hygiene, prerequisites, watchdog

REPO = Path(__file__).resolve().parents[1]
# Once per process: a test module importing ``tests.conftest`` by name runs this file a second
# time, and must not move the session to a new, unmigrated Airflow home. Each pytest-xdist worker
# (which inherits the controller's environment) gets a home and SQLite DB of its own.
_HOME_VAR = "EH_TESTS_AIRFLOW_HOME_" + os.environ.get("PYTEST_XDIST_WORKER", "main").upper()
_OWN_HOME = not os.environ.get(_HOME_VAR)  # this process made the home, and removes it at the end
_AIRFLOW_HOME = Path(os.environ.get(_HOME_VAR) or tempfile.mkdtemp(prefix="eh-tests-airflow-"))
os.environ[_HOME_VAR] = str(_AIRFLOW_HOME)
# The session's DAGs folder is an empty one of its own: anything that parses the DAGs folder into the
# shared metadata DB (an in-process dag.test() syncs its bundle) must not register the example DAGs'
# assets with this process's environment; a test that runs DAGs names its own folder.
(_AIRFLOW_HOME / "dags").mkdir(exist_ok=True)
os.environ.update(
    {
        "AIRFLOW_HOME": str(_AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(_AIRFLOW_HOME / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_AIRFLOW_HOME / 'airflow.db'}",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # as in any deployment, one key for every process on this metadata DB: what one encrypted
        # (an asset watcher's trigger arguments, Variables), a later `dag.test()` process decrypts
        "AIRFLOW__CORE__FERNET_KEY": os.environ.get("AIRFLOW__CORE__FERNET_KEY") or Fernet.generate_key().decode(),
    }
)


def pytest_configure(config: pytest.Config) -> None:
    """Four plugins for the whole session (a conftest's own hooks do not see session fixtures):
    every test file leaves os.environ and the process table as it found them (``hygiene``), a
    test whose server or browser is missing fails unless ``make test SKIP=...`` opted out of it
    (``prerequisites``), a test that outlives its timeout by far ends its worker with the stacks
    of where it hung (``watchdog``), and the run goes on after a worker ended (``xdist_schedule``)."""
    plugins = [hygiene, prerequisites, watchdog]
    if config.pluginmanager.hasplugin("xdist"):  # not where only pytest is installed (the floor leg's unit suite)
        from tests.support import xdist_schedule

        plugins.append(xdist_schedule)
    for plugin in plugins:
        if not config.pluginmanager.is_registered(plugin):
            config.pluginmanager.register(plugin, f"eh-{plugin.__name__.rsplit('.', 1)[-1]}")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _OWN_HOME:
        shutil.rmtree(_AIRFLOW_HOME, ignore_errors=True)


# The files that take longest (minutes each on 2 cores, --durations), longest first: handed out first
# (make test passes --no-loadscope-reorder: pytest-xdist would hand out the files with most tests first,
# which left the deployment test, two tests of minutes each, for the end of the run).
LONGEST_FILES = (
    "system/test_deployment.py",
    "integration/spark/test_spark_cluster_without_airflow.py",
    "integration/spark/test_spark_reader_crash.py",
    "integration/spark/test_spark_reader_dag.py",
    "compat/test_wheel_on_airflow_floor.py",
    "integration/spark/test_spark_datasource_stream.py",
    "system/test_example_spark_submit.py",
    "integration/events/test_event_driven_dag.py",
    "integration/spark/test_spark_stalled_driver.py",
    "system/test_scheduler_path.py",
    "integration/spark/test_spark_crash_recovery.py",
    "system/test_example_pipeline.py",
    "integration/test_chaos.py",
    "integration/ui/test_view.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/integration, tests/system and tests/compat needs the local stack.

    Test files run in collection order except :data:`LONGEST_FILES`, which go first. With
    ``EH_TEST_SHUFFLE=<seed>`` (``make test SHUFFLE=<seed>``) the test files run in an order drawn
    from the seed instead (a file's tests stay in order): other files share a pytest-xdist process,
    so a file that leaks into the next one shows. Every xdist process draws the same order.
    """
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts[0] in ("integration", "system", "compat"):
            item.add_marker(pytest.mark.integration)
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(str(item.path), []).append(item)
    order = list(files)
    seed = os.environ.get("EH_TEST_SHUFFLE")
    if seed:
        random.Random(seed).shuffle(order)
    else:  # the longest files first, so that the xdist processes finish together instead of one ending alone
        rank = {str(REPO / "tests" / name): n for n, name in enumerate(LONGEST_FILES)}
        order.sort(key=lambda path: rank.get(path, len(rank)))
    items[:] = [item for path in order for item in files[path]]


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = os.environ.get("EH_TEST_SHUFFLE")
    return f"test files shuffled with seed {seed} (EH_TEST_SHUFFLE)" if seed else None


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A fresh Airflow metadata DB (SQLite) in the session's own, new AIRFLOW_HOME.

    Migrated in a child process, as ``airflow db migrate`` runs in production (a copy of this process's
    one migrated DB, :func:`tests.support.airflow_home.copy_migrated_db`, where no file is there yet).
    The home is new, so there is nothing to reset; pooled in-process connections opened before (by a
    DAG import, say) are dropped so that they reopen on the migrated file.
    """
    from tests.support.airflow_home import copy_migrated_db

    db = _AIRFLOW_HOME / "airflow.db"
    if db.exists():  # opened already (an empty file): migrated in place
        subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True, env=os.environ.copy())
    else:
        copy_migrated_db(db)
    if "airflow.settings" in sys.modules:
        from airflow import settings

        if getattr(settings, "engine", None) is not None:
            settings.engine.dispose()
    return _AIRFLOW_HOME


def intact_airflow_db() -> Path:
    """The session's metadata DB, migrated again if SQLite finds it damaged (a warning then says so).

    For the tests that write Variables in this process after other test files ran on the same DB. Once in
    several full runs the DB was found malformed at that point; the cause is not known, and a test of a
    Variable's content must not fail for it. The warning shows in the run's summary, so it is not hidden.
    """
    db = _AIRFLOW_HOME / "airflow.db"
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as exc:  # damaged where the check itself reads
        verdict = str(exc)
    if verdict == "ok":
        return _AIRFLOW_HOME
    warnings.warn(f"the session's Airflow metadata DB {db} was damaged ({verdict}); migrated anew", stacklevel=2)
    from airflow import settings

    settings.engine.dispose()
    for leftover in _AIRFLOW_HOME.glob("airflow.db*"):
        leftover.unlink()
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True, env=os.environ.copy())
    settings.engine.dispose()
    return _AIRFLOW_HOME


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A throwaway Postgres server on a free 127.0.0.1 port; its DSN. Fails where none is installed (``SKIP=postgres`` skips)."""
    prerequisites.require("postgres")
    with databases.postgres_server() as dsn:
        assert dsn is not None, "the Postgres server's binaries were found, then not: see databases.postgres_server"
        yield dsn


@pytest.fixture(scope="session")
def mariadb() -> Iterator[dict]:
    """A throwaway MariaDB server on a free 127.0.0.1 port; PyMySQL connection arguments. Fails where none is installed (``SKIP=mariadb`` skips)."""
    prerequisites.require("mariadb")
    with databases.mariadb_server() as args:
        assert args is not None, "the MariaDB server's binaries were found, then not: see databases.mariadb_server"
        yield args


@pytest.fixture
def restored_environ() -> Iterator[None]:
    """``os.environ`` put back as it was after the test.

    For tests that run ``dag.test()`` in this process: Airflow's task runner exports ``AIRFLOW_CTX_*``
    for each task it runs and leaves them, and every later child process would inherit them.
    """
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def stack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stack")


@pytest.fixture(scope="session")
def azurite(stack_dir: Path) -> Iterator[object]:
    """Azurite's blob service on a free 127.0.0.1 port for the whole session."""
    from eventhubs_local.azurite import AzuriteProcess

    with AzuriteProcess(stack_dir / "azurite") as proc:
        yield proc


@pytest.fixture(scope="session")
def event_hubs(stack_dir: Path) -> Iterator[object]:
    """The local Event Hubs endpoint as a child process on free 127.0.0.1 ports for the whole session."""
    from eventhubs_local import EmulatorProcess

    with EmulatorProcess(stack_dir / "event-hubs", log_path=str(stack_dir / "event-hubs.log")) as proc:
        yield proc


def unique_name(prefix: str) -> str:
    """A name valid as a hub and a container: lower case, digits and dashes, at most 50 chars."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def hub(event_hubs: object) -> str:
    """A hub of 4 partitions of the test's own, with consumer group ``analytics`` beside ``$Default``."""
    name = unique_name("hub")
    event_hubs.admin.create_hub(name, partitions=4, consumer_groups=["analytics"])  # type: ignore[attr-defined]
    return name


@pytest.fixture
def container(azurite: object) -> str:
    """A blob container of the test's own (created)."""
    from azure.storage.blob import BlobServiceClient

    name = unique_name("c")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(name)  # type: ignore[attr-defined]
    return name


def connection_env(conn_id: str, conn_type: str, **fields: object) -> tuple[str, str]:
    """The ``AIRFLOW_CONN_*`` variable name and JSON value for a connection."""
    return f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": conn_type, **fields})


@pytest.fixture
def connections(event_hubs: object, azurite: object, hub: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """``azure_event_hubs_default`` (pointing at the test's hub) and ``wasb_default`` as AIRFLOW_CONN_* variables."""
    eh_conn = connection_env(
        "azure_event_hubs_default", "azure_event_hubs",
        extra={"connection_string": event_hubs.connection_string(hub)},  # type: ignore[attr-defined]
    )
    blob_conn = connection_env(
        "wasb_default", "wasb", extra={"connection_string": azurite.connection_string}  # type: ignore[attr-defined]
    )
    for name, value in (eh_conn, blob_conn):
        monkeypatch.setenv(name, value)
    return {"event_hubs": "azure_event_hubs_default", "wasb": "wasb_default", "hub": hub}


JS_CLIENT = Path(__file__).parent / "integration" / "js" / "client.mjs"


def run_js(emulator: Any, hub: str, steps: list[dict[str, Any]], timeout: float = 30,
           network: dict[str, Any] | None = None, connection_string: str | None = None) -> list[Any]:
    """Run ``steps`` with Microsoft's JavaScript SDK (``js/client.mjs``) in one node process.

    The script ends itself after ``timeout`` seconds (a hanging client fails fast with the step it
    hung in); a step that fails fails the test with the script's error. ``network``
    (``{"webSocket": True, "customEndpointAddress": ..., "caFile": ...}``) applies to every client of
    the run; ``connection_string`` replaces the endpoint's own.
    """
    request = {"connectionString": connection_string or emulator.connection_string(hub), "adminUrl": emulator.admin.url,
               "timeoutMs": int(timeout * 1000), "steps": steps, "network": network or {}}
    proc = subprocess.run(["node", str(JS_CLIENT), json.dumps(request)], capture_output=True, text=True,
                          timeout=timeout + 15, cwd=Path(__file__).parents[1])
    try:
        document = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise AssertionError(f"node exited {proc.returncode} without a result; stderr:\n{proc.stderr[-3000:]}") from None
    if proc.returncode != 0:
        step = document.get("step")
        raise AssertionError(f"JS step {step} ({steps[step]['op'] if 0 <= step < len(steps) else '?'}) failed: "
                             f"{document.get('error')}; results so far {document.get('results')}")
    return document["results"]


@pytest.fixture
def js() -> Callable[..., list[Any]]:
    return run_js
