"""``make test`` in fresh clones of one commit, one after another, as a newcomer's machine would run it.

Every run checks out the commit HEAD named when the first run started (``--commit`` names another),
so commits made while the runs go on do not mix into them. Each run clones the repository into a new
directory (nothing of this checkout is reused: no ``.venv``, ``node_modules`` or ``.local``), runs
``make test`` there with a clean environment and records its exit code, its time and pytest's closing
line. A run's clone is removed when it passes and kept, with its log, when it fails. The summary goes
to stdout and to ``.local/fresh/summary.txt``.

    python3 scripts/test_fresh.py --runs 5 [--skip mariadb] [--limit-minutes 30] [--shuffle] [--commit REV]

``--shuffle`` runs every run after the first with its test files in another order
(``make test SHUFFLE=<run>``), so that each file meets other neighbours on its pytest-xdist process.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLOSING = re.compile(r"^=+ (.*(passed|failed|error).*) in [\d.]+s.*=+$")
# what a developer's shell may carry that a newcomer's would not
DROPPED = ("VIRTUAL_ENV", "PYTHONPATH", "PYSPARK_PYTHON", "SKIP", "EH_SKIP", "PYTEST_ADDOPTS", "MAKEFLAGS", "MFLAGS")


def clean_env() -> dict[str, str]:
    """This environment less a checkout's traces: its variables, and its virtual environment on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED and not k.startswith(("AIRFLOW", "EH_"))}
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not (Path(d) / "activate").exists())
    return env


def closing_line(log: Path) -> str:
    """The last closing line of pytest (``N passed in ...``) in a run's log."""
    lines = [m.group(1) for line in log.read_text(errors="replace").splitlines() if (m := CLOSING.match(line))]
    return lines[-1] if lines else "(no pytest closing line)"


def main() -> int:
    """Run ``make test`` in fresh clones one after another; the exit status is 1 if any run was red."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip", default="")
    parser.add_argument("--limit-minutes", type=float, default=30.0, help="a run longer than this counts as failed")
    parser.add_argument("--shuffle", action="store_true", help="runs 2.. shuffle the test files (seed: the run's number)")
    parser.add_argument("--root", type=Path, default=REPO / ".local" / "fresh")
    parser.add_argument("--commit", default="HEAD", help="the commit every run tests (default: HEAD when the runs start)")
    args = parser.parse_args()

    commit = subprocess.run(["git", "rev-parse", "--verify", f"{args.commit}^{{commit}}"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.strip()
    head = commit[:7]
    if args.commit == "HEAD" and subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                                capture_output=True, text=True).stdout.strip():
        print("note: uncommitted changes are not in the clones; they test HEAD", head, flush=True)
    args.root.mkdir(parents=True, exist_ok=True)
    env = clean_env()
    rows: list[str] = []
    ok_runs = 0
    for run in range(1, args.runs + 1):
        where = args.root / f"{head}-run{run}"
        shutil.rmtree(where, ignore_errors=True)
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(where)], check=True)
        subprocess.run(["git", "checkout", "--quiet", "--detach", commit], cwd=where, check=True)
        cloned = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                                check=True).stdout.strip()
        log = args.root / f"{head}-run{run}.log"
        started = time.monotonic()
        with log.open("w") as out:
            shuffle = str(run) if args.shuffle and run > 1 else ""
            code = subprocess.run(["make", "test", f"SKIP={args.skip}", f"SHUFFLE={shuffle}"], cwd=where, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        minutes = (time.monotonic() - started) / 60
        ok = code == 0 and minutes <= args.limit_minutes
        ok_runs += ok
        order = f"files shuffled with seed {run}" if args.shuffle and run > 1 else "files in order"
        row = (f"run {run} of {args.runs} at {cloned} ({order}): {'green' if ok else 'RED'}, exit {code}, {minutes:.1f} min, "
               f"{closing_line(log)}; log {log}")
        rows.append(row)
        print(row, flush=True)
        if ok:
            subprocess.run(["make", "-s", "services-down"], cwd=where, env=env, capture_output=True)
            shutil.rmtree(where, ignore_errors=True)
    summary = f"{ok_runs} of {args.runs} fresh runs green (each under {args.limit_minutes:g} min)"
    (args.root / "summary.txt").write_text("\n".join([*rows, summary]) + "\n")
    print(summary)
    return 0 if ok_runs == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
