"""`make bench`: run every benchmark in this folder and write `bench/results.md`.

Each benchmark prints `key=value` pairs on its last line; this collects them into one table
with the machine they ran on. Pass benchmark names to run a subset, e.g. `publish_overhead`.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def machine() -> str:
    """The machine in one line: cores, CPU model, memory, system and Python."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def parse_last_line(output: str) -> dict[str, str]:
    """The ``key=value`` pairs of a benchmark's last output line (its figures)."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    if not lines:
        return {}
    return dict(pair.split("=", 1) for pair in lines[-1].split() if "=" in pair)


def main(argv: list[str]) -> int:
    """Run every benchmark (or those named in ``argv``) and write their figures to ``results.md``."""
    wanted = set(argv)
    scripts = sorted(p for p in HERE.glob("*.py") if p.name != "run_all.py" and not p.name.startswith("_"))
    scripts = [p for p in scripts if not wanted or p.stem in wanted]
    rows: list[tuple[str, str, float, dict[str, str]]] = []
    failed = 0
    for script in scripts:
        print(f"== {script.name}", flush=True)
        started = time.monotonic()
        result = subprocess.run([sys.executable, str(script)], cwd=REPO, text=True, capture_output=True)
        elapsed = time.monotonic() - started
        sys.stdout.write(result.stdout[-3000:])
        if result.returncode != 0:
            failed += 1
            sys.stdout.write(result.stderr[-3000:])
            rows.append((script.name, "failed", elapsed, {}))
        else:
            rows.append((script.name, "ok", elapsed, parse_last_line(result.stdout)))
    lines = [
        "# Benchmark results",
        "",
        f"Made by `make bench` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        f"Machine: {machine()}.",
        "The local Event Hubs endpoint and Azurite ran on the same machine as the benchmark.",
        "",
        "| benchmark | status | seconds | figures |",
        "| --- | --- | --- | --- |",
    ]
    for name, status, elapsed, figures in rows:
        shown = " ".join(f"{k}={v}" for k, v in figures.items())
        lines.append(f"| `bench/{name}` | {status} | {elapsed:.0f} | {shown} |")
    (HERE / "results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {HERE / 'results.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
