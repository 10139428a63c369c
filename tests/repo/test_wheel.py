"""The distributions built from the checkout, as `make release` builds them (``scripts/release.py``).

The provider's wheel carries what a user installing it needs (the license, the type marker, the
provider entry point, only dependencies the package uses) and nothing of the repository's harness;
the local endpoint is a wheel of its own; every artifact's files are the committed list's, and the
release check passes on them. Both distributions are built once for the module.
"""

from __future__ import annotations

import io
import re
import tarfile
import zipfile
from pathlib import Path

import pytest

from scripts import release

REPO = Path(__file__).resolve().parents[2]
PROVIDER, ENDPOINT = release.DISTRIBUTIONS
REWRITE = "if the change is meant, rewrite the lists: python scripts/release.py --write-expected"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[str]]:
    """Both distributions' sdists and wheels, as make release builds them, and the build's warnings."""
    return release.build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def artifacts(built: tuple[list[Path], list[str]]) -> dict[tuple[str, str], Path]:
    """``{(distribution name, "sdist" | "wheel"): path}``."""
    found = {(release.distribution_of(a).name, release.kind_of(a)): a for a in built[0]}
    assert len(found) == len(built[0]) == 4, [a.name for a in built[0]]
    return found


@pytest.fixture(scope="module")
def wheel(artifacts: dict[tuple[str, str], Path]) -> zipfile.ZipFile:
    return zipfile.ZipFile(artifacts[PROVIDER.name, "wheel"])


@pytest.fixture(scope="module")
def endpoint_wheel(artifacts: dict[tuple[str, str], Path]) -> zipfile.ZipFile:
    return zipfile.ZipFile(artifacts[ENDPOINT.name, "wheel"])


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (found,) = [n for n in wheel.namelist() if ".dist-info/" in n and n.endswith(name)]
    return wheel.read(found).decode()


def test_wheel_carries_the_apache_license_text_and_the_py_typed_marker(wheel: zipfile.ZipFile) -> None:
    license_text = _dist_info(wheel, "LICENSE")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert "airflow_provider_eh/py.typed" in wheel.namelist()


def test_wheel_registers_the_provider_and_declares_no_unused_checkpoint_store(wheel: zipfile.ZipFile) -> None:
    assert "provider_info = airflow_provider_eh.get_provider_info:get_provider_info" in _dist_info(wheel, "entry_points.txt")
    requires = [line.split(":", 1)[1].strip() for line in _dist_info(wheel, "METADATA").splitlines() if line.startswith("Requires-Dist:")]
    assert not [r for r in requires if r.startswith("azure-eventhub-checkpointstoreblob-aio")]


def test_wheel_registers_the_event_hubs_view_plugin_and_carries_its_static_files(wheel: zipfile.ZipFile) -> None:
    entry_points = _dist_info(wheel, "entry_points.txt")
    section = entry_points.split("[airflow.plugins]", 1)[1].split("\n[", 1)[0]
    assert "azure_event_hubs_view = airflow_provider_eh.plugins.event_hubs_view:EventHubsViewPlugin" in section
    names = set(wheel.namelist())
    for name in ("view.html", "view.js", "view.css", "format.js", "dom.js", "charts.js", "tab.html", "tab.js"):
        assert f"airflow_provider_eh/plugins/static/{name}" in names
        assert wheel.read(f"airflow_provider_eh/plugins/static/{name}") == (REPO / "airflow_provider_eh/plugins/static" / name).read_bytes()


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
@pytest.mark.parametrize("distribution", [PROVIDER.name, ENDPOINT.name])
def test_each_artifacts_files_are_the_committed_expected_list(
    artifacts: dict[tuple[str, str], Path], distribution: str, kind: str
) -> None:
    """``scripts/release/<name>.files``: a module added, moved or removed shows in the list's diff."""
    problems = release.file_list_problems(artifacts[distribution, kind])
    assert problems == [], "\n".join([*problems, REWRITE])


def test_provider_wheel_holds_its_package_and_dist_info_and_none_of_the_harness(wheel: zipfile.ZipFile) -> None:
    """Nothing but ``airflow_provider_eh/`` and its dist-info: no tests/, no local endpoint, and none of
    ``tests/support``'s modules (the stack, the deployment, databases, proxies) under the package."""
    names = [n for n in wheel.namelist() if not n.endswith("/")]
    outside = [n for n in names if not n.startswith(("airflow_provider_eh/", f"airflow_provider_eh-{PROVIDER.version}.dist-info/"))]
    assert outside == []
    assert not [n for n in names if n.startswith(("airflow_provider_eh/emulator/", "airflow_provider_eh/tests/"))]
    assert not [n for n in names if "/tests/" in n or "eventhubs_local" in n]
    harness = {p.stem for p in (REPO / "tests" / "support").glob("*.py")} - {"__init__"}
    assert harness, "tests/support has modules"
    testing = {Path(n).stem for n in names if n.startswith("airflow_provider_eh/testing/")}
    assert testing & harness == set(), "the repository's harness is in the provider's testing package"
    # the public helpers for users' own DAG tests stay
    assert {"__init__", "crash", "dag_test"} <= testing


def test_eventhubs_local_is_in_the_endpoint_wheel_only(wheel: zipfile.ZipFile, endpoint_wheel: zipfile.ZipFile) -> None:
    """The endpoint's wheel: its package, its CLI and pytest plugin, nothing of the provider or Airflow."""
    assert not [n for n in wheel.namelist() if n.startswith("eventhubs_local")]
    names = [n for n in endpoint_wheel.namelist() if not n.endswith("/")]
    assert [n for n in names if not n.startswith(("eventhubs_local/", f"eventhubs_local-{ENDPOINT.version}.dist-info/"))] == []
    assert {"eventhubs_local/__init__.py", "eventhubs_local/__main__.py", "eventhubs_local/pytest_plugin.py"} <= set(names)
    entry_points = _dist_info(endpoint_wheel, "entry_points.txt")
    assert "eventhubs-local = eventhubs_local.__main__:main" in entry_points
    assert "eventhubs_local = eventhubs_local.pytest_plugin" in entry_points.split("[pytest11]", 1)[1]
    imports = re.compile(r"^\s*(?:from|import)\s+(airflow|airflow_provider_eh)\b", re.M)
    assert [n for n in names if n.endswith(".py") and imports.search(endpoint_wheel.read(n).decode())] == []


def test_no_module_of_the_provider_wheel_names_a_path_of_a_checkout(wheel: zipfile.ZipFile) -> None:
    """Installed, ``Path(__file__).parents[2]`` is site-packages: nothing may read dags/, node_modules,
    requirements/dev.lock or .local relative to it (a text scan of every .py file of the wheel)."""
    modules = [n for n in wheel.namelist() if n.endswith(".py")]
    assert len(modules) > 50
    assert release.checkout_reference_problems(Path(wheel.filename or "")) == []
    # the scan finds what it looks for, and not a dotted module path that happens to contain .local
    found = [what for what, pattern in release.CHECKOUT_REFERENCES.items()
             for line in ('REPO = Path(__file__).resolve().parents[2]', 'REPO / "node_modules" / ".bin"',
                          'lock = REPO / "requirements/dev.lock"', 'state = REPO / ".local" / "stack"')
             if pattern.search(line)]
    assert sorted(found) == sorted(release.CHECKOUT_REFERENCES)
    assert not release.CHECKOUT_REFERENCES[".local"].search('"airflow.dag_processing.bundles.local.LocalDagBundle"')


def test_provider_sdist_carries_the_package_and_its_project_files_only(artifacts: dict[tuple[str, str], Path]) -> None:
    """No tests/, bench/, docs/, dags/, scripts/, endpoint/, node_modules or .local in the provider's sdist."""
    files = release.artifact_files(artifacts[PROVIDER.name, "sdist"])
    tops = {name.split("/", 1)[0] for name in files}
    assert tops == {"airflow_provider_eh", "airflow_provider_eh.egg-info", "LICENSE", "PKG-INFO", "README.md",
                    "pyproject.toml", "setup.cfg"}


def test_both_sdists_and_wheels_carry_the_license_as_a_file(artifacts: dict[tuple[str, str], Path]) -> None:
    """endpoint/LICENSE is a symlink to the repository's: the endpoint's sdist carries the file itself."""
    assert {a.name: release.license_problems(a) for a in artifacts.values()} == {a.name: [] for a in artifacts.values()}
    with tarfile.open(artifacts[ENDPOINT.name, "sdist"]) as sdist:
        (member,) = [m for m in sdist.getmembers() if m.name.endswith("/LICENSE")]
        assert member.isfile() and member.size == (REPO / "LICENSE").stat().st_size


def test_the_release_check_passes_on_the_built_artifacts(built: tuple[list[Path], list[str]]) -> None:
    """What `make release` runs: no build warning, and twine check --strict, metadata, licenses, file
    lists and the checkout scan all pass."""
    paths, warnings = built
    assert warnings == []
    assert release.check(paths) == []


def test_the_release_check_names_a_file_the_list_does_not_and_a_linked_license(
    artifacts: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    """The check fails with the difference, and on an sdist whose LICENSE is a link."""
    extra = tmp_path / artifacts[PROVIDER.name, "wheel"].name
    with zipfile.ZipFile(artifacts[PROVIDER.name, "wheel"]) as source, zipfile.ZipFile(extra, "w") as copy:
        for item in source.infolist():
            if item.filename != "airflow_provider_eh/__init__.py":
                copy.writestr(item, source.read(item))
        copy.writestr("tests/conftest.py", "")
    # what the built wheel's own check says (nothing, unless modules changed since the list was written) aside
    before = set(release.file_list_problems(artifacts[PROVIDER.name, "wheel"]))
    assert set(release.file_list_problems(extra)) - before == {
        f"{extra.name}: not in the expected list: tests/conftest.py",
        f"{extra.name}: missing (the expected list names it): airflow_provider_eh/__init__.py",
    }

    linked = tmp_path / f"eventhubs_local-{ENDPOINT.version}.tar.gz"
    with tarfile.open(linked, "w:gz") as sdist:
        link = tarfile.TarInfo(f"eventhubs_local-{ENDPOINT.version}/LICENSE")
        link.type, link.linkname = tarfile.SYMTYPE, "../LICENSE"
        sdist.addfile(link)
        readme = tarfile.TarInfo(f"eventhubs_local-{ENDPOINT.version}/README.md")
        readme.size = 2
        sdist.addfile(readme, io.BytesIO(b"# "))
    assert release.license_problems(linked) == [f"{linked.name}: LICENSE is a link to '../LICENSE', not the file"]
    assert f"{linked.name}: not in the expected list: LICENSE -> ../LICENSE" in release.file_list_problems(linked)


def test_the_long_description_links_only_what_resolves_on_the_package_index() -> None:
    """A relative link, a plain-http one, a page the site lacks and a heading its page lacks are each named;
    an absolute link into the site, to a page and heading of docs/, and an anchor of the description pass."""
    site = release.SITE
    description = (f"# Title\n\n## Install\n\n[ok]({site}connections/#networks) [home]({site}) [up](#install) "
                   f"[web](https://example.org/x) `[code](docs/x.md)`\n"
                   f"[rel](docs/index.md) [plain](http://example.org/) [gone]({site}no-such-page/) "
                   f"[moved]({site}connections/#no-such-heading) [self](#nowhere)\n")
    problems = release.link_problems(description, "x.whl")
    assert len(problems) == 5, problems
    for fragment in ("'docs/index.md'", "'http://example.org/'", "no-such-page", "no-such-heading", "#nowhere"):
        assert [p for p in problems if fragment in p], (fragment, problems)


def test_both_distributions_declare_the_project_urls_a_package_index_shows(artifacts: dict[tuple[str, str], Path]) -> None:
    assert {a.name: release.project_url_problems(a) for a in artifacts.values()} == {a.name: [] for a in artifacts.values()}
    assert release.SITE.startswith("https://") and release.site_page(release.SITE) == REPO / "docs" / "index.md"
