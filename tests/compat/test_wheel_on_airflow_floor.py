"""The wheel of this checkout on the lowest supported Airflow, installed as a user installs it.

A fresh environment (``.local/compat-venv``) gets the wheel built from the checkout, Airflow pinned to
the floor (``COMPAT_AIRFLOW``, the latest patch of the lowest supported minor) and common-compat pinned
to its declared minimum; every other package comes from the wheel's own metadata, resolved as pip
would (no lock; only the ``testing`` extra, the local endpoint's wheel built beside it, and the
``schemaregistry`` extra, whose typed events the unit suite checks there too). The only additions
(``ADDITIONS``) are the test tools (pytest) and the
SQLite provider, which the event-driven example's sink connection needs. Everything then runs in
that environment's Python, from a directory outside the checkout, so the checkout can never stand in
for the installed package; the event-driven example also runs under that environment's
``airflow standalone``, a real scheduler and triggerer on the floor. ``EH_COMPAT_AIRFLOW`` runs the
leg on another Airflow version, and ``EH_COMPAT_CONSTRAINTS`` names a constraints file to add
(Airflow's own, say).

Both wheels are built as ``make release`` builds them (each from its sdist). The environment is also
a user's first one: the documentation's testing example (which runs the docs' first DAG twice for one
day against the local endpoint and Azurite) and a test of the ``eventhubs-local`` pytest fixtures run
there with pytest, the endpoint's command line answers, and nothing of the environment changed but
Python's own bytecode cache (``__pycache__``; uv compiles nothing at install): no package wrote into
``site-packages``.
"""

from __future__ import annotations

import json
import os
import stat
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub
from airflow_provider_eh.testing.dag_test import failure_report
from eventhubs_local.ports import free_port
from tests.support.stack import connection_env, example_env
from tests.support.standalone import AirflowStandalone, standalone_env
from tests.conftest import REPO, unique_name
from tests.support.delivery import (
    DAG_ID,
    DELIVERY_BOUND,
    SAFETY_EVERY,
    SinkSampler,
    SteadyPublisher,
    check_within,
    create_watched_hub,
    delivery_times,
    sink_counts,
    standalone_settings,
    stream_classes,
    unconsumed_asset_events,
    wait_for,
    wait_for_watcher,
)

COMPAT_AIRFLOW = os.environ.get("EH_COMPAT_AIRFLOW", "3.1.8")
VENV = REPO / ".local" / "compat-venv"
PACKAGE = "airflow_provider_eh"
# What the environment gets besides the wheel and its dependencies: the test tools, and the SQLite
# provider for the event-driven example's sink (``eh_example_db``, a sqlite connection).
ADDITIONS = ("pytest>=8", "pytest-timeout>=2.3", "apache-airflow-providers-sqlite>=4.0")
# What the compat environment's Python must not inherit from this test process.
_FOREIGN_ENV = ("AIRFLOW", "EH_TESTS_", "PYTEST_", "PYTHON", "PYSPARK", "VIRTUAL_ENV", "AZURITE_BIN")


def declared_minimum(distribution: str) -> str:
    """The ``>=`` floor pyproject.toml declares for a dependency."""
    for requirement in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]:
        match = re.fullmatch(rf"{re.escape(distribution)}\s*>=\s*([\w.]+).*", requirement)
        if match:
            return match.group(1)
    raise AssertionError(f"pyproject.toml declares no minimum for {distribution}")


def uv() -> str:
    """uv from the dev environment (``make venv`` installs it), else from PATH."""
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found, "uv not found: run `make venv`"
    return found


@dataclass(frozen=True)
class CompatEnv:
    """The floor environment: its Python, a clean environment for it, and a work dir outside the checkout."""

    python: Path
    env: dict[str, str]
    work: Path
    # the environment's files right after the install (:func:`venv_files`)
    installed: dict[str, tuple[int, int] | None]

    def run(self, *args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.python), *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self.work, env={**self.env, **(env or {})})

    def run_ok(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        proc = self.run(*args, **kwargs)
        assert proc.returncode == 0, f"{args[:2]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        return proc


@pytest.fixture(scope="module")
def compat(tmp_path_factory: pytest.TempPathFactory) -> CompatEnv:
    """Build the wheel, create ``.local/compat-venv`` from scratch and install the wheel there on the floor."""
    tmp = tmp_path_factory.mktemp("compat")
    wheels = tmp / "wheel"
    # the provider, and the local endpoint its `testing` extra names: each wheel from its sdist, as `make
    # release` builds them (a wheel built in the checkout would take along what a build/ folder there holds)
    for source in (REPO, REPO / "endpoint"):
        subprocess.run([uv(), "build", "--quiet", "--out-dir", str(wheels), str(source)], check=True, timeout=300)
    (wheel,) = wheels.glob("airflow_provider_eh-*.whl")
    (endpoint_wheel,) = wheels.glob("eventhubs_local-*.whl")
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([uv(), "venv", "--quiet", "--python", sys.executable, str(VENV)], check=True, timeout=120)
    constraints = tmp / "floor.txt"
    constraints.write_text(
        f"apache-airflow=={COMPAT_AIRFLOW}\n"
        f"apache-airflow-providers-common-compat=={declared_minimum('apache-airflow-providers-common-compat')}\n"
        + (Path(os.environ["EH_COMPAT_CONSTRAINTS"]).read_text() if os.environ.get("EH_COMPAT_CONSTRAINTS") else "")
    )
    subprocess.run(
        [uv(), "pip", "install", "--quiet", "--python", str(VENV / "bin" / "python"), "--constraint", str(constraints),
         # the endpoint's wheel by its path too: as a find-links file of an unchanged version, uv could take a wheel it
         # cached from an earlier build at the same path
         "--find-links", str(wheels), f"{wheel}[testing,schemaregistry]", str(endpoint_wheel), *ADDITIONS],
        check=True, timeout=900,
    )
    home = tmp / "airflow-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN_ENV)}
    env.update({
        "PATH": f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    })
    work = tmp / "work"
    work.mkdir()
    return CompatEnv(python=VENV / "bin" / "python", env=env, work=work, installed=venv_files())


def venv_files() -> dict[str, tuple[int, int] | None]:
    """Every file of the compat environment with its size and mtime, and every folder (``None``), by path
    relative to it; Python's bytecode cache left out (``__pycache__`` folders: the interpreter writes
    them on import into an environment that was not compiled at install, as uv's is not)."""
    found: dict[str, tuple[int, int] | None] = {}
    for folder, subfolders, files in os.walk(VENV):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        relative = Path(folder).relative_to(VENV)
        found[f"{relative}/"] = None
        for name in files:
            info = (Path(folder) / name).lstat()
            found[str(relative / name)] = (info.st_size, info.st_mtime_ns) if not stat.S_ISLNK(info.st_mode) else None
    return found


def venv_changes(before: dict[str, tuple[int, int] | None], after: dict[str, tuple[int, int] | None]) -> list[str]:
    """What was added to, removed from or rewritten in the environment, one line each."""
    return ([f"added {path}" for path in sorted(after.keys() - before.keys())]
            + [f"removed {path}" for path in sorted(before.keys() - after.keys())]
            + [f"rewritten {path}" for path in sorted(before.keys() & after.keys()) if before[path] != after[path]])


def result_line(proc: subprocess.CompletedProcess[str]) -> Any:
    """The JSON a child script printed on its one ``RESULT `` line."""
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


def installed_versions(compat: CompatEnv) -> dict[str, str]:
    script = "import json, importlib.metadata as md; print(json.dumps({d.metadata['Name'].lower(): d.version for d in md.distributions()}))"
    return json.loads(compat.run_ok("-c", script).stdout)


def test_the_floor_environment_holds_the_wheel_on_the_lowest_airflow_with_the_testing_extra_only(compat: CompatEnv) -> None:
    floor = Version(declared_minimum("apache-airflow"))
    assert Version(COMPAT_AIRFLOW) >= floor
    if "EH_COMPAT_AIRFLOW" not in os.environ:
        assert Version(COMPAT_AIRFLOW).release[:2] == floor.release[:2], "the leg runs the declared floor's minor"
    versions = installed_versions(compat)
    assert versions["apache-airflow"] == COMPAT_AIRFLOW
    assert versions["apache-airflow-core"] == COMPAT_AIRFLOW
    assert versions["apache-airflow-providers-common-compat"] == declared_minimum("apache-airflow-providers-common-compat")
    assert versions["airflow-provider-eh"] == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert versions["eventhubs-local"] == tomllib.loads((REPO / "endpoint" / "pyproject.toml").read_text())["project"]["version"]
    # no other extra: neither the [spark] extra's full pyspark, nor the [messaging] extra's provider, nor the
    # [dev] extra's packages besides ADDITIONS came along
    extras = {"pyspark", "apache-airflow-providers-common-messaging", "apache-airflow-providers-postgres", "pymysql"}
    assert not extras & versions.keys(), sorted(extras & versions.keys())
    where = compat.run_ok("-c", f"import {PACKAGE}; print({PACKAGE}.__file__)").stdout.strip()
    assert Path(where).is_relative_to(VENV), f"{PACKAGE} imported from {where}, not from the installed wheel"


def public_modules() -> list[str]:
    """Every module of the package in the checkout whose dotted name has no ``_``-prefixed part."""
    names = []
    for path in (REPO / PACKAGE).rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return sorted(names)


DATA_SOURCE_CLASSES = ("airflow_provider_eh.spark.datasource.source", "airflow_provider_eh.spark.datasource.read_source")


def test_every_public_module_of_the_wheel_imports_on_the_floor_without_pyspark(compat: CompatEnv) -> None:
    """A plain install: every module imports, the Spark ones included, with ``pyspark`` made unimportable.

    All but the data source's Spark classes, which say what to install instead."""
    expected = public_modules()
    script = textwrap.dedent("""
        import importlib, importlib.abc, json, sys, traceback

        class NoPyspark(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "pyspark":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, NoPyspark())
        failed = {}
        for name in json.loads(sys.argv[1]):
            try:
                importlib.import_module(name)
            except BaseException:
                failed[name] = traceback.format_exc(limit=3)
        print("RESULT " + json.dumps(failed))
    """)
    proc = compat.run_ok("-c", script, json.dumps(expected))
    failed = result_line(proc)
    # the data source's Spark classes subclass PySpark's: without it, an error that says what to install
    for module in DATA_SOURCE_CLASSES:
        spark_classes = failed.pop(module, "")
        assert "install airflow-provider-eh[spark]" in spark_classes, (module, spark_classes)
    assert failed == {}, "\n".join(f"{name}:\n{tb}" for name, tb in failed.items())
    assert {"airflow_provider_eh.operators.spark_publish", "airflow_provider_eh.spark.session"} <= set(expected)


def test_airflow_providers_list_shows_the_provider_on_the_floor(compat: CompatEnv) -> None:
    proc = compat.run_ok("-m", "airflow", "providers", "list", "--output", "json")
    providers = {p["package_name"]: p for p in json.loads(proc.stdout[proc.stdout.index("["):])}
    assert "airflow-provider-eh" in providers, sorted(providers)
    assert "airflow-provider-eh" not in proc.stderr, proc.stderr[-3000:]


def test_every_example_dag_parses_without_import_errors_on_the_floor(compat: CompatEnv) -> None:
    script = textwrap.dedent("""
        import json, sys
        from pathlib import Path
        # as the DAG processor parses a bundle: BundleDagBag (3.1.7, moved in 3.2), or before 3.1.7
        # the bundle's root put on sys.path by the processor itself and a DagBag
        dags = Path(sys.argv[1])
        try:
            from airflow.dag_processing.dagbag import BundleDagBag as Bag
        except ImportError:
            try:
                from airflow.models.dagbag import BundleDagBag as Bag
            except ImportError:
                from airflow.models.dagbag import DagBag as Bag
                sys.path.append(str(dags))
        bag = Bag(dag_folder=str(dags), bundle_path=dags, safe_mode=False)
        print("RESULT " + json.dumps({"errors": bag.import_errors, "files": sorted({Path(d.fileloc).name for d in bag.dags.values()})}))
    """)
    proc = compat.run_ok("-c", script, str(REPO / "dags"))
    result = result_line(proc)
    assert result["errors"] == {}
    assert result["files"] == sorted(p.name for p in (REPO / "dags").glob("*.py") if not p.name.startswith("_"))


def test_unit_tests_pass_against_the_installed_wheel_on_the_floor(compat: CompatEnv) -> None:
    """The unit suite, copied out of the checkout so that only the installed wheel can be imported."""
    copy = compat.work / "checkout-tests"
    shutil.copytree(REPO / "tests", copy / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "dags", copy / "dags", ignore=shutil.ignore_patterns("__pycache__"))
    # the suite's list of prerequisites, which tests/support/prerequisites.py reads (not part of the package)
    shutil.copytree(REPO / "scripts", copy / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    env = {"AZURITE_BIN": str(REPO / "node_modules" / ".bin" / "azurite-blob")}
    proc = subprocess.run([str(compat.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit",
                           # the first two need the Azure provider, which a plain install does not bring;
                           # the third the common messaging provider (the `messaging` extra), the last three
                           # deltalake (the `deltalake` extra). The checks of the checkout itself
                           # (tests/repo) are not the wheel's.
                           "--ignore=tests/unit/hooks/test_azure_provider_coexistence.py",
                           "--ignore=tests/unit/hooks/test_wasb_parity.py",
                           "--ignore=tests/unit/test_queues.py",
                           "--ignore=tests/unit/ingest/test_delta_store.py",
                           "--ignore=tests/unit/ingest/test_sink_contract.py",
                           "--ignore=tests/unit/ingest/test_delta_column_types.py"],
                          capture_output=True, text=True, timeout=600, cwd=copy, env={**compat.env, **env})
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "skipped" not in summary, summary


PUBLISH_DAG = '''
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.operators.publish import EventHubPublishOperator


def orders(context):
    """The interval's 200 events, keyed by customer; the same on every run of the interval."""
    day = context["data_interval_start"].date().isoformat()
    return [{"body": {"id": f"{day}-{i}"}, "partition_key": f"customer-{i % 7}"} for i in range(200)]


with DAG(dag_id="compat_publish", schedule="@daily", start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), catchup=False) as dag:
    EventHubPublishOperator(task_id="publish", events=orders, state_container=CONTAINER, claim_timeout=30)
'''

RUN_DAG_TEST = """
import importlib.util, json, sys
from datetime import datetime
spec = importlib.util.spec_from_file_location("compat_publish", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.dag.test(logical_date=datetime.fromisoformat(sys.argv[2]))
print("RESULT " + json.dumps({"run": str(run.state), "publish": str(run.get_task_instance("publish").state)}))
"""


def test_publish_dag_run_on_the_floor_lands_each_event_once_and_a_rerun_adds_none(
    compat: CompatEnv, event_hubs: Any, azurite: Any, container: str
) -> None:
    """``dag.test()`` on the floor Airflow publishes a day through the local stack; a re-run of the day adds nothing."""
    hub = unique_name("compat")
    event_hubs.admin.create_hub(hub, partitions=2)
    dags = compat.work / "publish-dags"
    dags.mkdir()
    (dags / "compat_publish.py").write_text(PUBLISH_DAG.replace("CONTAINER", repr(container)))
    env = {
        **connection_env(event_hubs=event_hubs.connection_string(hub), blob=azurite.connection_string),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
    }
    compat.run_ok("-m", "airflow", "db", "migrate", env=env, timeout=600)
    for attempt in ("first run", "re-run"):
        proc = compat.run_ok("-c", RUN_DAG_TEST, str(dags / "compat_publish.py"), "2026-03-02T00:00:00+00:00", env=env)
        assert result_line(proc) == {"run": "success", "publish": "success"}, \
            f"attempt {attempt}\n" + failure_report(proc.stdout + proc.stderr)

    events = read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub))
    counts = Counter(json.loads(event.body)["id"] for event in events)
    assert len(counts) == 200 and set(counts.values()) == {1}, Counter(counts.values())
    assert len({key.rsplit("-", 1)[0] for key in counts}) == 1  # one interval's events


FLOOR_ORDERS = 180  # the steady stream: about a minute at the publisher's pace (3 events an order)


def test_event_driven_example_under_standalone_on_the_floor_loads_each_event_once_within_the_bound(
    compat: CompatEnv, event_hubs: Any, azurite: Any, tmp_path: Path
) -> None:
    """``eh_on_new_orders`` under the floor's ``airflow standalone`` (scheduler, triggerer, DAG processor):
    a steady stream of orders for about a minute; each event is in the sink once, and within its bound
    (``tests/support/delivery.py``): the steady stream's, and the safety schedule's more for the last
    batch, which no later event follows. Both the asset and the safety schedule started runs. Nothing
    is killed: on 3.1 a triggerer crash can lose an asset event (no acknowledged delivery)."""
    hub = create_watched_hub(event_hubs, "floor")
    home = tmp_path / "airflow-home"
    home.mkdir()
    db = tmp_path / "example.db"
    port = free_port()
    example = example_env(db, tmp_path / "data", event_hubs=event_hubs.connection_string(), blob=azurite.connection_string)
    example.pop("PYSPARK_PYTHON")  # the dev environment's Python; this DAG runs no Spark
    env = standalone_env(home, port, {**compat.env, **example}, python=str(compat.python))
    env.update(standalone_settings(hub, tmp_path / "dags"))
    airflow = AirflowStandalone(env, port, tmp_path / "standalone.log", python=str(compat.python))
    sampler = SinkSampler(db)
    publisher = SteadyPublisher(EventHubsEndpoint.from_connection_string(event_hubs.connection_string(), hub), "floor",
                                FLOOR_ORDERS)
    try:
        airflow.start()
        assert airflow.get("/version").json()["version"] == COMPAT_AIRFLOW
        airflow.wait_for_dag(DAG_ID)
        wait_for_watcher(airflow, event_hubs, hub)
        sampler.start()
        publisher.start()
        publisher.join(FLOOR_ORDERS * 2)
        assert not publisher.is_alive() and publisher.error is None, f"the stream did not end: {publisher.error}"
        sent_at = publisher.sent_at
        wait_for(lambda: set(sent_at) <= sampler.seen.keys(), SAFETY_EVERY + DELIVERY_BOUND + 60, "every event in the sink",
                 airflow)
        runs = airflow.wait_for_runs(DAG_ID, 1, timeout=300)
        sink = sink_counts(db)
        assert set(sink) == set(sent_at) and set(sink.values()) == {1}, "an event is missing from the sink or loaded twice"
        kinds = {r["run_type"] for r in runs}
        assert {"asset_triggered", "scheduled"} <= kinds, [(r["dag_run_id"], r["run_type"]) for r in runs]

        _check_the_tab_on_the_floor(airflow, runs, sum(sink.values()))

        times = delivery_times(sent_at, sampler.seen, sent_at)
        steady, last = stream_classes(sent_at)
        figures = [
            check_within(f"the steady stream on Airflow {COMPAT_AIRFLOW}", {k: times[k] for k in steady}, DELIVERY_BOUND),
            check_within("the stream's last batch", {k: times[k] for k in last}, SAFETY_EVERY + DELIVERY_BOUND),
        ]
        print("\n" + "\n".join(figures) + f"\n{len(runs)} runs; asset events no run consumed: {unconsumed_asset_events(home)}")
    finally:
        publisher.stop.set()
        sampler.close()
        airflow.stop()


def _check_the_tab_on_the_floor(airflow: AirflowStandalone, runs: list[dict[str, Any]], sink_rows: int) -> None:
    """The floor's API server registers the view's task-instance tab (an external view, destination
    ``task_instance``) and answers it: each run's ``load_new_orders`` is an ingest, and the rows the tabs
    show add up to the sink's."""
    import httpx

    plugins = airflow.get("/plugins").json()["plugins"]
    views = {(v["url_route"], v["destination"]) for p in plugins for v in p.get("external_views", [])}
    assert {("eventhubs", "nav"), ("eventhubs-tab", "task_instance")} <= views, plugins
    headers = dict(airflow.client.headers) if airflow.client is not None else {}
    shown = 0
    for run in runs:
        answer = httpx.get(f"{airflow.base}/eventhubs/api/task-instance", headers=headers, timeout=60, params={
            "dag_id": DAG_ID, "run_id": run["dag_run_id"], "task_id": "load_new_orders"})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["kind"] == "ingest" and body["ingest"]["returned"] is True, body
        shown += body["ingest"]["totals"]["rows"]
    assert shown == sink_rows


# The eventhubs-local pytest plugin in a user's test file: the fixtures are only named (the installed
# distribution's pytest11 entry point registers them), nothing of the plugin is imported.
PLUGIN_TESTS = '''
from azure.eventhub import EventData, EventHubProducerClient
from azure.storage.blob import BlobServiceClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.testing import read_hub

SEEN_HUBS = []


def test_each_test_gets_a_hub_of_its_own_that_takes_events(eventhubs_endpoint, eventhubs_hub, eventhubs_connection_string):
    assert f"EntityPath={eventhubs_hub}" in eventhubs_connection_string
    with EventHubProducerClient.from_connection_string(eventhubs_connection_string) as producer:
        batch = producer.create_batch()
        for n in range(5):
            batch.add(EventData(f"event-{n}"))
        producer.send_batch(batch)
    assert eventhubs_endpoint.admin.hub(eventhubs_hub)["events"] == 5
    events = read_hub(EventHubsEndpoint.from_connection_string(eventhubs_connection_string, eventhubs_hub))
    assert sorted(e.body for e in events) == [f"event-{n}".encode() for n in range(5)]
    SEEN_HUBS.append(eventhubs_hub)


def test_the_next_test_gets_another_hub(eventhubs_hub, eventhubs_endpoint):
    assert SEEN_HUBS and eventhubs_hub not in SEEN_HUBS
    assert eventhubs_endpoint.admin.hub(eventhubs_hub)["events"] == 0


def test_azurite_blob_serves_blobs(azurite_blob):
    service = BlobServiceClient.from_connection_string(azurite_blob.connection_string)
    service.create_container("plugin-test").upload_blob("hello.txt", b"hello")
    assert service.get_container_client("plugin-test").download_blob("hello.txt").readall() == b"hello"
'''


def run_pytest(compat: CompatEnv, folder: Path, env: dict[str, str]) -> str:
    """pytest in the compat environment on a folder outside the checkout; its summary line, all passed."""
    proc = subprocess.run([str(compat.python), "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(folder)],
                          capture_output=True, text=True, timeout=900, cwd=folder, env={**compat.env, **env})
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and not re.search(r"skipped|xfail|error", summary), summary
    return summary


def test_a_users_first_environment_runs_the_docs_testing_example_and_the_endpoints_fixtures_writing_nothing_into_it(
    compat: CompatEnv, tmp_path: Path
) -> None:
    """The docs' testing example (``docs/examples/test_publish_dag.py`` as the checkout has it now, beside
    the docs' first DAG, ``publish_events.py``: the DAG run twice for one day against the local endpoint
    and Azurite, each event on the hub once), then a test file of the ``eventhubs-local`` fixtures, both
    with pytest from folders outside the checkout, on an Airflow home of their own; the endpoint's
    command line. The environment's files before and after are the same (Python's bytecode cache
    aside): nothing wrote into ``site-packages``, in this test or since the install."""
    before = venv_files()
    home = tmp_path / "airflow-home"
    (home / "dags").mkdir(parents=True)
    env = {
        "AIRFLOW_HOME": str(home),
        # a user's default DAGs folder, empty: the example names the folder of the DAG under test itself
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AZURITE_BIN": str(REPO / "node_modules" / ".bin" / "azurite-blob"),
    }
    compat.run_ok("-m", "airflow", "db", "migrate", env=env, timeout=600)

    example = compat.work / "docs-example"
    example.mkdir()
    for name in ("test_publish_dag.py", "publish_events.py"):
        shutil.copy(REPO / "docs" / "examples" / name, example / name)
    summary = run_pytest(compat, example, env)
    assert summary.startswith("1 passed"), summary

    plugin = compat.work / "plugin-fixtures"
    plugin.mkdir()
    (plugin / "test_eventhubs_local_fixtures.py").write_text(PLUGIN_TESTS)
    summary = run_pytest(compat, plugin, env)
    assert summary.startswith("3 passed"), summary

    cli = subprocess.run([str(VENV / "bin" / "eventhubs-local"), "--help"], capture_output=True, text=True, timeout=60,
                         cwd=compat.work, env={**compat.env, **env})
    assert cli.returncode == 0 and "--data-dir" in cli.stdout and "--hub" in cli.stdout, cli.stdout + cli.stderr

    after = venv_files()
    assert venv_changes(before, after) == [], "written into the environment by this test"
    assert venv_changes(compat.installed, after) == [], "written into the environment since the install"
