"""The documentation builds, its links hold, and every code example in it runs.

- ``mkdocs build --strict`` succeeds: a warning fails it, and the site's settings make a warning of
  every broken link or anchor between pages and of every docstring ``:param:`` the code does not take
  (the API reference is generated from the docstrings). A copy of the site with one fault of each
  kind must fail, so the checks themselves are checked.
- Relative links in README.md, CONTRIBUTING.md and bench/README.md point to files (and headings) that exist.
- Python examples live in ``docs/examples/`` and pages include them; no page types one inline. Each
  example DAG imports without errors and runs with ``dag.test()`` against the local Event Hubs
  endpoint and Azurite, and the hub and the SQL tables are read back afterwards; the example test
  (``test_publish_dag.py``) runs under pytest as a user would run it.
- Every ``make <target>``, ``python bench/<x>.py``, ``scripts/<x>.py``, ``python -m`` module and file
  of the repository that the documents name in code exists.
- ``endpoint/README.md``, the ``eventhubs-local`` description on PyPI, links nothing (no repository
  to resolve a relative link against), and every option, fixture and admin method it names exists.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from scripts import doc_links
from tests.conftest import REPO
from tests.support.airflow_home import migrated_home
from tests.support.stack import example_env

DOCS = REPO / "docs"
EXAMPLES = DOCS / "examples"
PAGES = sorted(p for p in DOCS.rglob("*.md"))
LINKED_DOCUMENTS = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "bench" / "README.md"]
DOCUMENTS = [*LINKED_DOCUMENTS, *PAGES]

INCLUDE = re.compile(r'^--8<-- "(?P<path>docs/examples/[\w/]+\.py)(?::[\w-]+)?"$')
REPO_PATH = re.compile(r"^((?:tests|bench|scripts|dags|docs|airflow_provider_eh|endpoint)/[\w./-]*[\w/])(?:::[\w\[\],-]+)?$")
FILE_NAME = re.compile(r"^([\w./-]*\w\.(?:py|md))(?:::[\w\[\],-]+)?$")  # `test_x.py`, `publishing/wire.py::test_y`


def mkdocs_build(config: Path, site: Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=cwd, capture_output=True, text=True, timeout=600,
    )


# -- the site -----------------------------------------------------------------------------------


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    build = mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert build.returncode == 0, build.stderr[-6000:]
    assert (tmp_path / "site" / "reference" / "publishing" / "index.html").is_file()


def test_a_broken_link_a_missing_anchor_and_a_drifted_docstring_each_fail_the_build(tmp_path: Path) -> None:
    """The build of a copy of the site with one fault of each kind fails, naming each: the checks are on."""
    copy = tmp_path / "copy"
    shutil.copytree(DOCS, copy / "docs")
    for name in ("mkdocs.yml", "CHANGELOG.md"):
        shutil.copy(REPO / name, copy / name)
    (copy / "airflow_provider_eh").symlink_to(REPO / "airflow_provider_eh")
    (copy / "drifted.py").write_text(
        'def publish(events, *, generation=0):\n    """Publish.\n\n    :param events: the events.\n'
        '    :param generations: a parameter that was renamed.\n    """\n'
    )
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text() + "\n[gone](no-such-page.md)\n\n[moved](connections.md#no-such-heading)\n\n"
                     "::: drifted.publish\n")
    build = mkdocs_build(copy / "mkdocs.yml", tmp_path / "site", cwd=copy)
    assert build.returncode != 0
    assert "no-such-page.md" in build.stderr, build.stderr[-3000:]
    assert "no-such-heading" in build.stderr, build.stderr[-3000:]
    assert "Parameter 'generations' does not appear in the function signature" in build.stderr, build.stderr[-3000:]


def test_relative_links_in_the_readme_contributing_and_bench_readme_point_to_what_exists() -> None:
    assert [REPO / name for name in doc_links.DOCUMENTS] == LINKED_DOCUMENTS
    broken = [line for document in LINKED_DOCUMENTS for line in doc_links.broken_links(document)]
    assert not broken, "\n".join(broken)


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doc_links, "REPO", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## How it `works`, plainly\n")
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\n[ok](docs/page.md#how-it-works-plainly) [here](#title) `[code](nowhere.md)`\n"
                      "[gone](docs/nope.md) [moved](docs/page.md#how-it-works) [web](https://example.org/x)\n")
    assert doc_links.broken_links(readme) == [
        "README.md: docs/nope.md: docs/nope.md does not exist",
        "README.md: docs/page.md#how-it-works: docs/page.md has no heading #how-it-works",
    ]


# -- code in the documents -----------------------------------------------------------------------


def test_pages_include_python_examples_from_files_and_type_none_inline() -> None:
    inline = []
    for page in DOCUMENTS:
        for lang, body in doc_links.fenced_blocks(page.read_text()):
            if lang not in ("python", "py", "python3"):
                continue
            lines = [line.strip() for line in body.splitlines() if line.strip()]
            if page not in PAGES or not lines or not all(INCLUDE.match(line) for line in lines):
                inline.append(f"{page.relative_to(REPO)}: {body.strip().splitlines()[0] if body.strip() else '(empty)'}")
    assert not inline, "inline Python blocks (put the code in docs/examples/ and include it):\n" + "\n".join(inline)


def test_every_example_is_shown_on_some_page() -> None:
    included = {m["path"] for page in PAGES for _, body in doc_links.fenced_blocks(page.read_text())
                for m in (INCLUDE.match(line.strip()) for line in body.splitlines()) if m}
    examples = {str(p.relative_to(REPO)) for p in EXAMPLES.glob("*.py")}
    assert included <= examples, f"pages include examples that do not exist: {sorted(included - examples)}"
    assert examples <= included, f"examples no page shows: {sorted(examples - included)}"


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return {m for line in text.splitlines() for m in re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", line)}


def repository_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()
    return ["/" + name for name in listed if (REPO / name).exists()]


def test_commands_and_paths_the_documents_name_exist() -> None:
    targets = makefile_targets()
    files = repository_files()
    missing = []
    for document in DOCUMENTS:
        where = document.relative_to(REPO)
        for code in doc_links.code_of(document.read_text()):
            for target in re.findall(r"(?<![\w-])make ([a-z][\w-]*)", code):
                if target not in targets:
                    missing.append(f"{where}: make {target}")
            for script in re.findall(r"(?<![\w/.-])((?:bench|scripts)/[\w.-]+\.py)", code):
                if not (REPO / script).is_file():
                    missing.append(f"{where}: {script}")
            path = REPO_PATH.match(code.strip())
            if path and not (REPO / path[1]).exists():
                missing.append(f"{where}: {path[1]}")
            name = FILE_NAME.match(code.strip())  # a file named by its tail: some file of the repository ends so
            if name and not path and not any(f.endswith("/" + name[1].lstrip("./")) for f in files):
                missing.append(f"{where}: {name[1]}")
            for module in re.findall(r"python -m (airflow_provider_eh(?:\.\w+)+)", code):
                if not (REPO / module.replace(".", "/")).with_suffix(".py").is_file() and \
                        not (REPO / module.replace(".", "/") / "__main__.py").is_file():
                    missing.append(f"{where}: python -m {module}")
    assert not missing, "named in the documents but missing:\n" + "\n".join(missing)


ENDPOINT_README = REPO / "endpoint" / "README.md"


def test_the_endpoint_readme_links_nothing_and_names_what_exists() -> None:
    text = ENDPOINT_README.read_text()
    links = doc_links.LINK.findall(doc_links.prose_of(text))
    assert not links, f"endpoint/README.md is read on PyPI, where no link into the repository resolves: {links}"

    from eventhubs_local import EmulatorAdmin, pytest_plugin

    helped = subprocess.run([sys.executable, "-m", "eventhubs_local", "--help"], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    code = " ".join(doc_links.code_of(text))
    options = set(re.findall(r"(?<![\w-])(--[a-z][\w-]+)", code))
    assert options and not {o for o in options if o not in helped}, f"options the CLI lacks: {options}"
    fixtures = set(re.findall(r"\b(eventhubs_\w+|azurite_blob)\b", code)) - {"eventhubs_local"}
    assert fixtures and all(hasattr(pytest_plugin, name) for name in fixtures), fixtures
    routes = [line.split("|")[2] for line in text.splitlines() if re.match(r"\| `(GET|POST|DELETE) /", line)]
    methods = set(re.findall(r"(\w+)\(", " ".join(routes)))
    assert methods and not {m for m in methods if not hasattr(EmulatorAdmin, m)}, methods


def test_every_example_dag_imports_without_errors() -> None:
    from airflow.dag_processing.dagbag import BundleDagBag

    bag = BundleDagBag(dag_folder=str(EXAMPLES), bundle_path=EXAMPLES, safe_mode=False)
    assert bag.import_errors == {}
    files = {Path(dag.fileloc).name for dag in bag.dags.values()}
    assert files == {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("test_")}


# -- the examples, run ---------------------------------------------------------------------------

RUN_EXAMPLES = """
import asyncio, json, sys
from datetime import datetime, timezone
from pathlib import Path

from airflow.dag_processing.dagbag import BundleDagBag
from airflow_provider_eh.testing.dag_test import failed_tasks

folder, plan = Path(sys.argv[1]), json.loads(sys.argv[2])
bag = BundleDagBag(dag_folder=str(folder), bundle_path=folder)
for dag_id, date, conf in plan:
    logical_date = datetime.fromisoformat(date).replace(tzinfo=timezone.utc) if date else None
    try:
        run = bag.dags[dag_id].test(logical_date=logical_date, run_conf=conf or None)
    except Exception as exc:
        result = {"dag_id": dag_id, "date": date, "error": f"{type(exc).__name__}: {exc}"}
    else:
        result = {"dag_id": dag_id, "date": date, "state": str(run.state)}
        if str(run.state) != "success":
            result["failed"] = failed_tasks(run)
    print("RESULT " + json.dumps(result), flush=True)


async def first_event(trigger):
    events = trigger.run()
    try:
        return (await asyncio.wait_for(anext(events), timeout=120)).payload
    finally:
        await events.aclose()


# The asset watchers' triggers, as the triggerer runs them: the first asset event of each
for dag_id in ("example_load_new_orders", "example_queue_triggered"):
    (asset,) = bag.dags[dag_id].timetable.asset_condition.objects
    trigger = asset.watchers[0].trigger
    trigger = getattr(trigger, "trigger", trigger)  # MessageQueueTrigger selects the Event Hubs trigger
    print("TRIGGER " + json.dumps({"dag_id": dag_id, "class": type(trigger).__name__,
                                   "payload": asyncio.run(first_event(trigger))}, default=str), flush=True)
"""

DAY = "2026-11-02"
# The runs, in order: each publishing example twice for one day (a run and its re-run), then the
# loaders, which read what the publishers left in the hub.
PLAN: list[tuple[str, str | None, dict[str, Any]]] = [
    ("example_publish_events", DAY, {}),
    ("example_publish_events", DAY, {}),
    ("example_spark_publish", DAY, {"data_dir": "<data_dir>"}),
    ("example_spark_publish", DAY, {"data_dir": "<data_dir>"}),
    ("example_ingest_and_wait", DAY, {}),
    ("example_ingest_and_wait", DAY, {}),
    ("example_load_new_orders", None, {}),
    ("example_await_event", None, {}),
    ("example_queue_triggered", None, {}),
]
PUBLISHED = {  # producer group (default: dag_id.task_id) -> the events one day publishes
    "example_publish_events.publish_orders": 100,
    "example_spark_publish.publish_orders": 1000,
    "example_ingest_and_wait.publish_payments": 50,
}


@pytest.fixture(scope="module")
def examples_env(event_hubs: Any, azurite: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The hub ``orders`` the examples name (consumer groups ``analytics`` and ``airflow-watcher``), the
    SQL connection ``orders_db``, and an Airflow home and metadata DB of their own, migrated here."""
    tmp = tmp_path_factory.mktemp("examples")
    event_hubs.admin.create_hub("orders", partitions=4, consumer_groups=["analytics", "airflow-watcher"])
    db = tmp / "orders.db"
    env = migrated_home(tmp / "airflow", EXAMPLES, {
        **example_env(tmp / "example.db", tmp / "data", event_hubs=event_hubs.connection_string(),
                      blob=azurite.connection_string, spark_master="local[2]"),
        "AIRFLOW_CONN_ORDERS_DB": json.dumps({"conn_type": "sqlite", "host": str(db)}),
    })
    return {"env": env, "db": db, "data_dir": tmp / "data", "tmp": tmp}


@pytest.mark.integration
def test_every_example_dag_runs_against_the_local_stack_and_publishes_each_event_once(
        examples_env: dict[str, Any], event_hubs: Any) -> None:
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint
    from airflow_provider_eh.client.readback import read_hub
    from airflow_provider_eh.testing.dag_test import failure_report

    plan = [(dag_id, date, {k: str(examples_env["data_dir"]) if v == "<data_dir>" else v for k, v in conf.items()})
            for dag_id, date, conf in PLAN]
    proc = subprocess.run([sys.executable, "-c", RUN_EXAMPLES, str(EXAMPLES), json.dumps(plan)],
                          capture_output=True, text=True, timeout=1500, env=examples_env["env"], cwd=REPO)
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    outcomes = [(r["dag_id"], r.get("state") or r.get("error")) for r in results]
    failed = [task for r in results for task in r.get("failed", [])]
    assert outcomes == [(dag_id, "success") for dag_id, _, _ in PLAN], \
        f"{outcomes} (exit {proc.returncode})\n" + failure_report(proc.stdout + proc.stderr, failed)

    # the hub: each publishing example's day once, though each ran twice
    events = read_hub(EventHubsEndpoint.from_connection_string(event_hubs.connection_string("orders"), "orders"))
    by_group = Counter(e.properties.get("eh.group") for e in events)
    assert dict(by_group) == PUBLISHED
    orders = Counter(json.loads(e.body)["order_id"] for e in events)
    assert len(orders) == sum(PUBLISHED.values()) and set(orders.values()) == {1}

    # the loaders: the whole hub once in each table (the second ingest run loaded nothing again)
    with sqlite3.connect(examples_env["db"]) as sql:
        for table in ("payments", "new_orders"):
            rows = Counter(r[0] for r in sql.execute(f"SELECT order_id FROM {table}"))
            assert rows == orders, f"{table}: {len(rows)} orders, {sum(rows.values())} rows"

    # the watchers: each fired for events of the hub
    fired = {t["dag_id"]: t for t in (json.loads(line[8:]) for line in proc.stdout.splitlines()
                                      if line.startswith("TRIGGER "))}
    assert set(fired) == {"example_load_new_orders", "example_queue_triggered"}, proc.stderr[-3000:]
    for watcher in fired.values():
        assert watcher["class"] == "EventHubEventTrigger"
        payload = watcher["payload"]
        assert payload["eventhub"] == "orders" and payload["consumer_group"] == "airflow-watcher"
        assert 1 <= payload["events"] <= 100  # one batch: batch_size or fewer
        assert sum(p["count"] for p in payload["partitions"].values()) == payload["events"]


@pytest.mark.integration
def test_the_testing_example_passes_under_pytest(examples_env: dict[str, Any]) -> None:
    """``test_publish_dag.py`` as a user runs it: its own endpoint and Azurite (the ``eventhubs-local``
    fixtures), two ``dag.test()`` runs, in an Airflow home whose DAGs folder does not hold the DAG."""
    (examples_env["tmp"] / "user-dags").mkdir()
    env = migrated_home(examples_env["tmp"] / "user-home", examples_env["tmp"] / "user-dags", {})
    env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW_CONN_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--basetemp", str(examples_env["tmp"] / "pytest"),
         str(EXAMPLES / "test_publish_dag.py")],
        capture_output=True, text=True, timeout=900, env=env, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout
