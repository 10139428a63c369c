"""Write the fault table of docs/failures.md from the fault matrix's cases, so the page and the tests cannot drift.

The cases are data in ``tests/integration/failures/cases.py`` (each fault, each path it can happen on,
what the error says, whether Airflow retries it, what has landed, how fast it fails);
``tests/integration/failures/test_failure_matrix.py`` makes every fault for real and checks every
cell. This script renders the same cells between the page's markers::

    python scripts/failure_table.py          # rewrite the table in docs/failures.md
    python scripts/failure_table.py --check  # exit 1 when the page differs from the cases

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
BEGIN = "<!-- failure-table: python scripts/failure_table.py -->"
END = "<!-- /failure-table -->"

# How the table words the placeholders of a cell's message parts.
WORDS = {
    "{conn}": "the connection id", "{wasb}": "the blob connection id", "{address}": "the address",
    "{proxy}": "the proxy's address", "{hub}": "the hub", "{group}": "the consumer group",
    "{container}": "the container",
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


def table(cases: ModuleType) -> str:
    """The Markdown of the table: a row per cell, faults in the cases' order, then their paths'."""
    lines = ["| fault | path | the error names | retried | what has landed | fails within |",
             "| --- | --- | --- | --- | --- | --- |"]
    for cell in cases.CELLS:
        retried = "(a message, not an error)" if cell.path == "test_connection" else RETRIED[cell.retry]
        says = ", ".join(_part(p) for p in cell.says)
        if cell.gap:
            says += f" (open: {cell.gap})"
        lines.append(f"| {cases.FAULTS[cell.fault].title} | {cases.PATHS[cell.path].title} | {says} | {retried} | "
                     f"{cell.lands} | {cell.within:g} s |")
    lines += ["", "How the test makes each fault:", ""]
    lines += [f"- **{fault.title}**: {fault.made_by}." for fault in cases.FAULTS.values()]
    return "\n".join(lines)


def render(page: str, cases: ModuleType) -> str:
    """``page`` with the text between the markers replaced by :func:`table`."""
    head, sep, rest = page.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{PAGE.relative_to(REPO)} lacks the markers {BEGIN} and {END}")
    return f"{head}{BEGIN}\n{table(cases)}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """Write the table (or, with ``--check``, say whether the page holds it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/failures.md differs from the cases")
    args = parser.parse_args(argv)
    page = PAGE.read_text()
    wanted = render(page, load_cases())
    if args.check:
        if wanted != page:
            print(f"{PAGE.relative_to(REPO)} differs from the fault matrix's cases: run python scripts/failure_table.py")
            return 1
        return 0
    if wanted != page:
        PAGE.write_text(wanted)
        print(f"wrote {PAGE.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
