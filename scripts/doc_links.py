"""Relative links in the repository's own Markdown (README.md, CONTRIBUTING.md, bench/README.md) point to what exists.

The documentation site checks its own pages' links when it builds (``mkdocs build --strict``); these
three files are read on the repository's host and on PyPI instead, so ``make docs`` checks them here:
every relative link names a file or folder that exists, and an ``#anchor`` a heading of the Markdown
file it points to (anchors as GitHub makes them). Links inside code are not links. ``tests/docs``
reads Markdown with the same functions. Standard library only.

    python scripts/doc_links.py            # prints each broken link; exit status 1 if there is one
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", "CONTRIBUTING.md", "bench/README.md")

FENCE = re.compile(
    r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.M | re.S,
)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced code block."""
    return [(m["lang"].lower(), m["body"]) for m in FENCE.finditer(text)]


def code_of(text: str) -> list[str]:
    """The code in a Markdown text: its fenced blocks, then its inline code spans."""
    return [body for _, body in fenced_blocks(text)] + [m[2] for m in CODE_SPAN.finditer(FENCE.sub("", text))]


def prose_of(text: str) -> str:
    """A Markdown text without its code."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """A heading's anchor: lower case, markup and punctuation dropped, spaces as dashes."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).strip().replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings; a repeated heading gets ``-1``, ``-2``..."""
    found: set[str] = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        if re.match(r"#{1,6} ", line):
            base = slug(line.lstrip("#"))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def broken_links(document: Path) -> list[str]:
    """Each relative link of ``document`` whose file or heading does not exist, with why."""
    broken = []
    where = document.relative_to(REPO)
    for match in LINK.finditer(prose_of(document.read_text())):
        target = match["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        path = (document.parent / path_part).resolve() if path_part else document
        if not path.exists():
            broken.append(f"{where}: {target}: {path_part} does not exist")
        elif anchor and path.suffix == ".md" and anchor not in anchors_of(path):
            broken.append(f"{where}: {target}: {path.relative_to(REPO)} has no heading #{anchor}")
    return broken


def main() -> int:
    """Print every broken relative link of the checked documents; the exit status is 1 if any."""
    broken = [line for name in DOCUMENTS for line in broken_links(REPO / name)]
    for line in broken:
        print(f"broken link: {line}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
