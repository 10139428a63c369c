"""Write the fault table of docs/failures.md from the fault matrix's cases, so the page and the tests cannot drift.

The cases are data in ``tests/integration/failures/cases.py`` (each fault, each path it can happen on,
what the error says, whether Airflow retries it, what has landed, how fast it fails);
``tests/integration/failures/test_failure_matrix.py`` makes every fault for real and checks every
cell. This script renders the same cells between the markers of two pages:

- ``docs/failures.md``, the user's: a row per fault (what the error names, whether it is retried,
  how fast it fails, the paths it was made on, and what has landed where that differs from the
  path's usual), then what has landed on each path;
- ``docs/verification.md``, the evidence: how the test makes each fault.

::

    python scripts/failure_table.py          # rewrite both tables
    python scripts/failure_table.py --check  # exit 1 when a page differs from the cases

``tests/docs/test_failure_table.py`` runs the check.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "integration" / "failures" / "cases.py"
PAGE = REPO / "docs" / "failures.md"
EVIDENCE = REPO / "docs" / "verification.md"
BEGIN = "<!-- failure-table: python scripts/failure_table.py -->"
END = "<!-- /failure-table -->"
MADE_BEGIN = "<!-- fault-making: python scripts/failure_table.py -->"
MADE_END = "<!-- /fault-making -->"

# How the table words the placeholders of a cell's message parts.
WORDS = {
    "{conn}": "the connection id", "{wasb}": "the blob connection id", "{address}": "the address",
    "{proxy}": "the proxy's address", "{hub}": "the hub", "{group}": "the consumer group",
    "{container}": "the container", "127.0.0.1:": "the storage account's address",
}
# A path as the grouped table names it: short, the way a user names the class
SHORT_PATHS = {
    "publish": "`EventHubPublishOperator`", "spark_publish": "`SparkToEventHubOperator`",
    "ingest": "`EventHubIngestOperator`", "test_connection": "`test_connection`",
    "event_trigger": "`EventHubEventTrigger`", "queue": "`MessageQueueTrigger`",
    "await_sensor": "`EventHubAwaitEventSensor`", "checkpoint_sensor": "`EventHubCheckpointSensor` (deferred)",
    "checkpoint_poke": "`EventHubCheckpointSensor` (poke)", "readback": "the read-back", "view": "the Event Hubs view",
}
RETRIED = {"fail": "no", "retry": "yes"}


def load_cases(path: Path = CASES) -> ModuleType:
    """The cases module, loaded from its file (it imports nothing, so no test dependency is needed)."""
    spec = importlib.util.spec_from_file_location("failure_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _part(part: str) -> str:
    for placeholder, words in WORDS.items():
        if part == placeholder:
            return words
        part = part.replace(placeholder, f"<{words}>")
    return f"`{part}`"


def short_path(key: str) -> str:
    """A path's name in the grouped table."""
    return SHORT_PATHS.get(key, key)


def usual_landing(cases: ModuleType) -> dict[str, str]:
    """What has landed when a path fails, the most common over its cells, by path key in the cases' order."""
    seen: dict[str, list[str]] = {}
    for cell in cases.CELLS:
        seen.setdefault(cell.path, []).append(cell.lands)
    return {path: max(lands, key=lands.count) for path, lands in seen.items()}


def _seconds(cells: list) -> str:
    low, high = min(c.within for c in cells), max(c.within for c in cells)
    return f"{low:g} s" if low == high else f"{low:g} to {high:g} s"


def table(cases: ModuleType) -> str:
    """The Markdown of the user's table: a row per fault, in the cases' order, then what lands per path."""
    usual = usual_landing(cases)
    lines = ["| fault | the error names | retried | fails within | made on |",
             "| --- | --- | --- | --- | --- |"]
    for key, fault in cases.FAULTS.items():
        cells = [c for c in cases.CELLS if c.fault == key]
        if not cells:
            continue
        says = ", ".join(_part(p) for p in dict.fromkeys(p for c in cells for p in c.says))
        retried = "/".join(dict.fromkeys(RETRIED[c.retry] for c in cells if c.path != "test_connection"))
        by_note: dict[str, list[str]] = {}  # the paths with the same note on what landed, in the cases' order
        for cell in cells:
            name = short_path(cell.path) + (f" (open: {cell.gap})" if cell.gap else "")
            by_note.setdefault("" if cell.lands == usual[cell.path] else cell.lands, []).append(name)
        paths = "; ".join(", ".join(names) + (f": {note}" if note else "") for note, names in by_note.items())
        lines.append(f"| {fault.title} | {says} | {retried or 'no'} | {_seconds(cells)} | {paths} |")
    lines += ["", "What has landed when a path fails, unless its row above says otherwise:", "",
              "| path | what has landed |", "| --- | --- |"]
    lines += [f"| {short_path(path)} | {lands} |" for path, lands in usual.items()]
    return "\n".join(lines)


def making(cases: ModuleType) -> str:
    """The Markdown of the evidence: how the test makes each fault."""
    return "\n".join(f"- **{fault.title}**: {fault.made_by}." for fault in cases.FAULTS.values())


def _between(page: str, begin: str, end: str, text: str, where: Path) -> str:
    head, sep, rest = page.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise SystemExit(f"{where.relative_to(REPO)} lacks the markers {begin} and {end}")
    return f"{head}{begin}\n{text}\n{end}{tail}"


def render(page: str, cases: ModuleType) -> str:
    """``page`` (docs/failures.md) with the text between its markers replaced by :func:`table`."""
    return _between(page, BEGIN, END, table(cases), PAGE)


def render_evidence(page: str, cases: ModuleType) -> str:
    """``page`` (docs/verification.md) with the text between its markers replaced by :func:`making`."""
    return _between(page, MADE_BEGIN, MADE_END, making(cases), EVIDENCE)


def main(argv: list[str] | None = None) -> int:
    """Write the tables (or, with ``--check``, say whether the pages hold them)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a page differs from the cases")
    args = parser.parse_args(argv)
    cases = load_cases()
    differ = 0
    for path, rendering in ((PAGE, render), (EVIDENCE, render_evidence)):
        page = path.read_text()
        wanted = rendering(page, cases)
        if wanted == page:
            continue
        if args.check:
            print(f"{path.relative_to(REPO)} differs from the fault matrix's cases: run python scripts/failure_table.py")
            differ = 1
        else:
            path.write_text(wanted)
            print(f"wrote {path.relative_to(REPO)}")
    return differ


if __name__ == "__main__":
    sys.exit(main())
