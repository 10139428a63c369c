"""What ``make demo`` and ``make test`` need on the machine beyond the Python packages: one list for all.

Before anything runs, ``make test`` and ``make demo`` install what is missing from Debian's packages
where this user may (root, or sudo without a password) and otherwise name the command that does
(``ensure``); ``make prerequisites`` installs (``install``); CONTRIBUTING.md's table is this list
(``markdown``, compared by a unit test), and the test suite asks it whether a test's server or
browser is there (``tests/support/prerequisites.py``). Standard library only: it runs before the
virtual environment exists.

    python3 scripts/prerequisites.py ensure [--for test|demo] [--skip chromium,mariadb]
    python3 scripts/prerequisites.py check [--for test|demo] [--skip ...]
    python3 scripts/prerequisites.py install [--for test|demo] [--skip ...]
    python3 scripts/prerequisites.py markdown
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass


def _version(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout + proc.stderr


def _major(text: str) -> int:
    found = re.search(r"(\d+)(?:\.\d+)*", text)
    return int(found.group(1)) if found else 0


def _which(name: str, *dirs: str) -> str | None:
    """``name`` on PATH, else in one of ``dirs`` (globs allowed: Debian keeps Postgres in a versioned dir)."""
    found = shutil.which(name)
    for pattern in dirs:
        for directory in sorted(glob.glob(pattern), reverse=True):
            found = found or shutil.which(name, path=directory)
    return found


def _python() -> str | None:
    import importlib.util

    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs under any python3, to say which is missing
        return f"found Python {sys.version.split()[0]}, the package needs 3.11 or newer"
    return None if importlib.util.find_spec("ensurepip") else "the venv module cannot install pip (no ensurepip)"


def _java() -> str | None:
    if not shutil.which("java"):
        return "not found"
    quoted = re.search(r'version "([^"]+)"', _version(["java", "-version"]))
    major = _major(quoted.group(1).removeprefix("1.") if quoted else "0")  # "1.8.0_392" is Java 8
    return None if major >= 17 else f"found Java {major}, Spark 4 needs 17 or newer"


def _node() -> str | None:
    if not (shutil.which("node") and shutil.which("npm")):
        return "node or npm not found"
    major = _major(_version(["node", "--version"]).lstrip("v"))
    return None if major >= 18 else f"found Node {major}, Azurite needs 18 or newer"


def _present(*names: str, dirs: tuple[str, ...] = ()) -> Callable[[], str | None]:
    def check() -> str | None:
        missing = [name for name in names if not _which(name, *dirs)]
        return f"{', '.join(missing)} not found" if missing else None

    return check


@dataclass(frozen=True)
class Prerequisite:
    """One thing the machine must have; ``key`` is the name ``make test SKIP=...`` takes."""

    key: str
    what: str
    debian: str
    used_by: str
    check: Callable[[], str | None]  # None when present, else what is wrong
    needed_for: tuple[str, ...] = ("test",)
    skippable: bool = True


PREREQUISITES: tuple[Prerequisite, ...] = (
    Prerequisite("python", "Python 3.11+ with venv", "python3 python3-venv", "everything (`.venv/`)",
                 _python, ("test", "demo"), skippable=False),
    Prerequisite("java", "Java 17+", "openjdk-17-jre-headless", "Spark (local mode, Spark Connect server)",
                 _java, ("test", "demo"), skippable=False),
    Prerequisite("node", "Node 18+ and npm", "nodejs npm",
                 "Azurite (blob storage), Microsoft's JavaScript SDK, the view's formatting tests",
                 _node, ("test", "demo"), skippable=False),
    Prerequisite("chromium", "Chromium", "chromium", "the Event Hubs view's browser tests",
                 _present("chromium")),
    Prerequisite("postgres", "PostgreSQL server", "postgresql",
                 "the Postgres ingestion sink tests, the metadata database of the scheduler and deployment tests",
                 _present("initdb", "postgres", dirs=("/usr/lib/postgresql/*/bin",))),
    Prerequisite("mariadb", "MariaDB server", "mariadb-server",
                 "the MySQL/MariaDB ingestion sink tests, Azurite's metadata in the ledger benchmark",
                 _present("mariadb-install-db", "mariadbd", dirs=("/usr/sbin", "/usr/bin"))),
    Prerequisite("redis", "Redis server", "redis-server", "the Celery broker of the deployment test (CeleryExecutor)",
                 _present("redis-server", dirs=("/usr/bin", "/usr/sbin"))),
)
BY_KEY = {p.key: p for p in PREREQUISITES}


def parse_skip(text: str | None) -> set[str]:
    """``"chromium, mariadb"`` -> ``{"chromium", "mariadb"}``; an unknown or unskippable name is an error."""
    keys = {part.strip().lower() for part in (text or "").replace(" ", ",").split(",") if part.strip()}
    unknown = keys - BY_KEY.keys()
    if unknown:
        raise SystemExit(f"SKIP={','.join(sorted(unknown))}: not a prerequisite; "
                         f"SKIP takes {', '.join(p.key for p in PREREQUISITES if p.skippable)}")
    fixed = sorted(k for k in keys if not BY_KEY[k].skippable)
    if fixed:
        raise SystemExit(f"SKIP={','.join(fixed)}: needed by every run, it cannot be skipped")
    return keys


def install_command(items: list[Prerequisite]) -> str:
    """The ``apt-get install`` command (through sudo unless root) for ``items``."""
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"{sudo}apt-get install -y --no-install-recommends {' '.join(p.debian for p in items)}"


def missing(purpose: str, skip: set[str]) -> list[tuple[Prerequisite, str]]:
    """The prerequisites of ``purpose`` not skipped that are missing, each with what is wrong."""
    return [(p, problem) for p in PREREQUISITES
            if purpose in p.needed_for and p.key not in skip and (problem := p.check())]


def check(purpose: str, skip: set[str]) -> int:
    """Print a line per missing prerequisite, with the command that installs it; 1 if any is missing."""
    absent = missing(purpose, skip)
    for p, problem in absent:
        hint = f" (or `make {purpose} SKIP={p.key}` to run without {p.used_by})" if p.skippable else ""
        print(f"missing: {p.what} ({problem}), for {p.used_by}: {install_command([p])}{hint}", file=sys.stderr)
    if absent:
        print("`make prerequisites` installs all of them; nothing was run.", file=sys.stderr)
    return 1 if absent else 0


def may_install() -> bool:
    """Whether this user can run apt-get here without being asked for a password."""
    if not shutil.which("apt-get"):
        return False
    if os.geteuid() == 0:
        return True
    return bool(shutil.which("sudo")) and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0


def ensure(purpose: str, skip: set[str]) -> int:
    """Install what is missing where this user may; elsewhere say what is missing and how to install it."""
    if missing(purpose, skip) and may_install():
        return install(purpose, skip)
    return check(purpose, skip)


def install(purpose: str, skip: set[str]) -> int:
    """Install the missing prerequisites from Debian's packages, then check again."""
    absent = [p for p, _ in missing(purpose, skip)]
    if absent:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        print(f"installing from Debian's packages: {' '.join(p.debian for p in absent)}", flush=True)
        subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
        packages = [name for p in absent for name in p.debian.split()]
        subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
                       check=True, env=env, stdout=subprocess.DEVNULL)
    return check(purpose, skip)


def markdown() -> str:
    """CONTRIBUTING.md's prerequisites table."""
    rows = ["| prerequisite | Debian package | used by | `SKIP=` |", "| --- | --- | --- | --- |"]
    for p in PREREQUISITES:
        rows.append(f"| {p.what} | `{p.debian}` | {p.used_by} | {f'`{p.key}`' if p.skippable else 'no'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """The command line: ``check``, ``install`` or ``markdown``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["ensure", "check", "install", "markdown"])
    parser.add_argument("--for", dest="purpose", choices=["test", "demo"], default="test")
    parser.add_argument("--skip", default=os.environ.get("SKIP", ""))
    args = parser.parse_args(argv)
    if args.action == "markdown":
        print(markdown())
        return 0
    skip = parse_skip(args.skip)
    return {"ensure": ensure, "check": check, "install": install}[args.action](args.purpose, skip)


if __name__ == "__main__":
    sys.exit(main())
