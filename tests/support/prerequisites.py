"""The suite's side of ``scripts/prerequisites.py``: a test whose server or browser is missing fails.

A test that needs a prerequisite says so (``require("mariadb")`` in a fixture, or
``@pytest.mark.requires("chromium")``). Where it is missing the test fails with the command that
installs it; only ``make test SKIP=mariadb`` (``EH_SKIP``) skips it, and the end of the run lists
every skip with its reason, so a green run that checked less than the README claims says so.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from scripts.prerequisites import BY_KEY, install_command, parse_skip

OPTED_OUT = "opted out with SKIP="


def skipped_keys() -> set[str]:
    return parse_skip(os.environ.get("EH_SKIP", ""))


def require(key: str) -> None:
    """Skip when the user opted out of ``key``, fail with the install command when it is missing."""
    prerequisite = BY_KEY[key]
    if key in skipped_keys():
        pytest.skip(f"{OPTED_OUT}{key}: {prerequisite.used_by} not checked")
    problem = prerequisite.check()
    if problem:
        pytest.fail(f"{prerequisite.what} is missing ({problem}); it is needed for {prerequisite.used_by}. "
                    f"Install it: {install_command([prerequisite])} (or `make prerequisites`), "
                    f"or opt out: make test SKIP={key}", pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires(key): needs a prerequisite of scripts/prerequisites.py")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("requires"):
        for key in marker.args:
            require(key)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Every skip of the run, grouped by reason: what this green run did not check."""
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if not reasons:
        terminalreporter.write_line("not checked in this run: nothing (no test skipped)")
        return
    terminalreporter.section("not checked in this run", yellow=True)
    for reason, count in sorted(reasons.items()):
        terminalreporter.write_line(f"{count:4d} skipped: {reason}")
