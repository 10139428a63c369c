"""The one list of machine prerequisites: what ``make test`` installs or says when one is missing, and
CONTRIBUTING.md's copy."""

from __future__ import annotations

import re

import pytest

from scripts import prerequisites
from scripts.prerequisites import Prerequisite
from tests.conftest import REPO
from tests.support import prerequisites as suite


def absent(key: str, skippable: bool = True) -> Prerequisite:
    return Prerequisite(key, f"The {key} server", f"{key}-server", f"the {key} tests",
                        lambda: f"{key}d not found", skippable=skippable)


def test_contributing_shows_the_list_the_makefile_checks() -> None:
    guide = (REPO / "CONTRIBUTING.md").read_text()
    shown = re.search(r"<!-- prerequisites: .* -->\n(.*?)\n<!-- /prerequisites -->", guide, re.S)
    assert shown, "CONTRIBUTING.md has no prerequisites table between its markers"
    assert shown.group(1).strip() == prerequisites.markdown()


def test_ci_runs_the_readmes_test_command_alone() -> None:
    """make test installs its prerequisites itself: CI runs the one command a newcomer runs."""
    ci = (REPO / ".ci" / "run").read_text()
    assert ci.rstrip().endswith("make test")
    assert "apt-get" not in ci and "make prerequisites" not in ci
    assert "$(PREREQS) ensure --for test" in (REPO / "Makefile").read_text()


def test_ensure_installs_what_is_missing_where_this_user_may(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prerequisites, "PREREQUISITES", (absent("mariadb"),))
    installed: list[str] = []
    monkeypatch.setattr(prerequisites, "may_install", lambda: True)
    monkeypatch.setattr(prerequisites, "install", lambda purpose, skip: installed.append(purpose) or 0)
    assert prerequisites.ensure("test", set()) == 0
    assert installed == ["test"]


def test_ensure_names_the_install_command_where_this_user_may_not(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(prerequisites, "PREREQUISITES", (absent("mariadb"),))
    monkeypatch.setattr(prerequisites, "may_install", lambda: False)
    monkeypatch.setattr(prerequisites, "install", lambda purpose, skip: pytest.fail("installed without the right to"))
    assert prerequisites.ensure("test", set()) == 1
    assert "apt-get install -y --no-install-recommends mariadb-server" in capsys.readouterr().err


def test_missing_prerequisite_is_one_line_with_its_install_command_and_nothing_runs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(prerequisites, "PREREQUISITES", (absent("mariadb"), absent("java", skippable=False)))
    assert prerequisites.check("test", set()) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("missing: The mariadb server (mariadbd not found), for the mariadb tests: ")
    assert "apt-get install -y --no-install-recommends mariadb-server" in lines[0]
    assert "make test SKIP=mariadb" in lines[0]
    assert "apt-get install -y --no-install-recommends java-server" in lines[1] and "SKIP" not in lines[1]
    assert "nothing was run" in lines[2]


def test_skip_names_what_the_user_opted_out_of(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prerequisites, "PREREQUISITES", (absent("mariadb"),))
    assert prerequisites.check("test", {"mariadb"}) == 0


def test_skip_of_an_unknown_or_essential_prerequisite_is_refused() -> None:
    assert prerequisites.parse_skip(" chromium,MariaDB ") == {"chromium", "mariadb"}
    with pytest.raises(SystemExit, match=r"SKIP=mysql: not a prerequisite; SKIP takes chromium, postgres, mariadb, redis"):
        prerequisites.parse_skip("mysql")
    with pytest.raises(SystemExit, match=r"SKIP=java: needed by every run, it cannot be skipped"):
        prerequisites.parse_skip("java,chromium")


def test_a_test_needing_a_missing_prerequisite_fails_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(prerequisites.BY_KEY, "mariadb", absent("mariadb"))
    monkeypatch.delenv("EH_SKIP", raising=False)
    with pytest.raises(pytest.fail.Exception, match=r"mariadbd not found.*apt-get install .*mariadb-server.*SKIP=mariadb"):
        suite.require("mariadb")


def test_a_test_needing_an_opted_out_prerequisite_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(prerequisites.BY_KEY, "mariadb", absent("mariadb"))
    monkeypatch.setenv("EH_SKIP", "mariadb")
    with pytest.raises(pytest.skip.Exception, match=r"opted out with SKIP=mariadb: the mariadb tests not checked"):
        suite.require("mariadb")


def test_this_machine_has_what_the_suite_needs_unless_skipped() -> None:
    """The suite itself runs here, so every prerequisite the user did not skip is present."""
    skipped = suite.skipped_keys()
    assert {p.key: p.check() for p in prerequisites.PREREQUISITES if p.key not in skipped} == \
        {p.key: None for p in prerequisites.PREREQUISITES if p.key not in skipped}
