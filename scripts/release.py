"""Build the sdists and wheels of both distributions of this repository and check them for a release.

The distributions: the provider (``airflow-provider-eh``, from the repository's root) and the local
endpoint (``eventhubs-local``, from ``endpoint/``). ``uv build`` makes each one's sdist, then its wheel
from that sdist (so the sdist is known to build, and nothing left in a ``build/`` folder of the
checkout can reach the wheel). Then, for every artifact:

- metadata and long-description rendering: ``twine check --strict`` (a missing or unrenderable
  description fails);
- name and version as the distribution's ``pyproject.toml`` declares them;
- its file list against the one committed in ``scripts/release/<name>.files``, the difference
  printed (a file the list does not name, a file the list names that the artifact lacks);
- the license: the Apache License text as a regular file (``endpoint/LICENSE`` is a symlink to the
  repository's; an sdist must carry the file, not the link);
- the provider's wheel: no module reads a path relative to a checkout (``parents[`` path arithmetic,
  ``node_modules``, ``requirements/dev.lock``, ``.local``);
- the project URLs a package index shows: ``Documentation``, ``Source``, ``Changelog`` and ``Issues``, each an
  ``https://`` address;
- the long description's links, as the package index shows them: each one absolute (``https://``) or an anchor
  of the description itself; one into the documentation site names a page of ``docs/`` and, with an anchor, a
  heading of that page. The check reads the form of the links, offline: it fetches nothing.

Warnings of the build backend (a readme not found, a deprecated setting) fail the check too.
Standard library and twine (``requirements/dev.in``).

    python scripts/release.py                   # build into .local/dist and check; exit status 1 on a finding
    python scripts/release.py --out DIR         # another output folder (emptied first)
    python scripts/release.py --no-build DIR    # check artifacts already built into DIR
    python scripts/release.py --write-expected  # build, then write scripts/release/*.files from what was built

When a module is added, moved or removed, the expected lists change with it: ``--write-expected``
rewrites them, and the diff of ``scripts/release/`` shows what the release gains or loses.
"""

from __future__ import annotations

import argparse
import email.parser
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

try:
    from scripts import doc_links
except ImportError:  # run as `python scripts/release.py`: its own folder is on the path
    import doc_links  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
EXPECTED = REPO / "scripts" / "release"
DEFAULT_OUT = REPO / ".local" / "dist"
# Text that would make an installed module depend on a checkout around it (the provider's wheel only:
# the endpoint looks for azurite-blob in node_modules/.bin of the working directory, as npm installs it)
CHECKOUT_REFERENCES = {
    "parents[ path arithmetic": re.compile(r"parents\["),
    "node_modules": re.compile(r"node_modules"),
    "requirements/dev.lock": re.compile(r"requirements/dev\.lock"),
    ".local": re.compile(r"(?<![\w.])\.local\b"),  # the checkout's .local/, not a module path like bundles.local
}
# Backend output that is no finding: setuptools says so on every build under uv
BENIGN_WARNINGS = re.compile(r"byte-compiling is disabled")
WARNING = re.compile(r"\b\w*Warning: |\bwarning: ")
# The project URLs every distribution declares, as the package index names them (core metadata's Project-URL)
PROJECT_URLS = ("Documentation", "Source", "Changelog", "Issues")
# The documentation site (mkdocs.yml's docs/, built with directory URLs: docs/connections.md is <site>connections/)
SITE = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]["Documentation"]
LICENSE_MARKERS = ("Apache License", "Version 2.0, January 2004", "END OF TERMS AND CONDITIONS")


@dataclass(frozen=True)
class Distribution:
    """A distribution built from this repository: its project name and source folder."""

    name: str
    source: Path
    scan_for_checkout_references: bool = False

    @property
    def stem(self) -> str:
        """The name as artifact file names spell it (``airflow_provider_eh``)."""
        return re.sub(r"[-_.]+", "_", self.name).lower()

    @property
    def version(self) -> str:
        return tomllib.loads((self.source / "pyproject.toml").read_text())["project"]["version"]

    @property
    def expected_list(self) -> Path:
        return EXPECTED / f"{self.stem}.files"


DISTRIBUTIONS = (
    Distribution("airflow-provider-eh", REPO, scan_for_checkout_references=True),
    Distribution("eventhubs-local", REPO / "endpoint"),
)


def uv() -> str:
    """The path of uv: beside this Python (the dev environment's), else on PATH."""
    beside = Path(sys.executable).with_name("uv")
    found = str(beside) if beside.exists() else shutil.which("uv")
    if not found:
        raise SystemExit("uv not found: run `make venv`")
    return found


def build(out: Path, distributions: Sequence[Distribution] = DISTRIBUTIONS) -> tuple[list[Path], list[str]]:
    """Build each distribution's sdist, then its wheel from the sdist, into ``out`` (emptied first).

    :return: the artifacts, and the build backend's warnings (one line each, naming the distribution)
    """
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    warnings: list[str] = []
    for dist in distributions:
        run = subprocess.run([uv(), "build", "--out-dir", str(out), str(dist.source)],
                             capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise SystemExit(f"uv build {dist.source} failed:\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}")
        lines = (run.stdout + run.stderr).splitlines()
        found = ((line, WARNING.search(line)) for line in lines if not BENIGN_WARNINGS.search(line))
        warnings += sorted({f"{dist.name}: build warning: {line[match.start():].strip()}" for line, match in found if match})
    return artifacts_in(out), warnings


def artifacts_in(folder: Path) -> list[Path]:
    """The sdists and wheels in a folder (uv writes a .gitignore beside them)."""
    return sorted(p for p in folder.iterdir() if p.name.endswith((".whl", ".tar.gz")))


def distribution_of(artifact: Path, distributions: Sequence[Distribution] = DISTRIBUTIONS) -> Distribution:
    """The distribution an sdist or wheel belongs to, by its file name."""
    for dist in distributions:
        if artifact.name.startswith(f"{dist.stem}-"):
            return dist
    raise ValueError(f"{artifact.name} is none of {[d.name for d in distributions]}'s")


def kind_of(artifact: Path) -> str:
    """``wheel`` or ``sdist``, by the file name."""
    if artifact.name.endswith(".whl"):
        return "wheel"
    if artifact.name.endswith(".tar.gz"):
        return "sdist"
    raise ValueError(f"{artifact.name} is neither a wheel nor an sdist")


def artifact_files(artifact: Path) -> list[str]:
    """The files of a wheel or sdist, as the expected lists name them.

    A wheel's ``<stem>-<version>.dist-info/`` is ``<stem>-{version}.dist-info/``; an sdist's top folder
    (``<stem>-<version>/``) is left out. Folders are not listed; an sdist's symlink is listed with
    `` -> target`` (it is not a file, so no expected list names it).
    """
    dist = distribution_of(artifact)
    if kind_of(artifact) == "wheel":
        with zipfile.ZipFile(artifact) as wheel:
            names = [n for n in wheel.namelist() if not n.endswith("/")]
        prefix = f"{dist.stem}-{dist.version}.dist-info/"
        return sorted(f"{dist.stem}-{{version}}.dist-info/{n.removeprefix(prefix)}" if n.startswith(prefix) else n
                      for n in names)
    files = []
    with tarfile.open(artifact) as sdist:
        for member in sdist.getmembers():
            top, _, name = member.name.partition("/")
            if member.isdir() or not name:
                continue
            files.append(f"{name} -> {member.linkname}" if member.issym() or member.islnk() else name)
    return sorted(files)


def read_expected(dist: Distribution) -> dict[str, list[str]]:
    """The committed file lists of a distribution: ``{"sdist": [...], "wheel": [...]}``."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in dist.expected_list.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif current is None:
            raise ValueError(f"{dist.expected_list}: {line!r} comes before a [sdist] or [wheel] section")
        else:
            current.append(line)
    return sections


def write_expected(artifacts: Iterable[Path]) -> list[Path]:
    """Write each distribution's expected list from the artifacts built (one sdist and one wheel each)."""
    lists: dict[Distribution, dict[str, list[str]]] = {}
    for artifact in artifacts:
        lists.setdefault(distribution_of(artifact), {})[kind_of(artifact)] = artifact_files(artifact)
    for dist, sections in lists.items():
        # the readme pyproject.toml declares belongs in the sdist, also when the build went without it
        readme = tomllib.loads((dist.source / "pyproject.toml").read_text())["project"].get("readme")
        if isinstance(readme, str) and "sdist" in sections and readme not in sections["sdist"]:
            sections["sdist"] = sorted([*sections["sdist"], readme])
    written = []
    for dist, sections in lists.items():
        text = [f"# The files of {dist.name}'s sdist and wheel, which `make release` (scripts/release.py) checks.",
                "# Rewrite with `python scripts/release.py --write-expected` when modules are added, moved or removed."]
        for kind in ("sdist", "wheel"):
            text += ["", f"[{kind}]", *sections.get(kind, [])]
        dist.expected_list.parent.mkdir(parents=True, exist_ok=True)
        dist.expected_list.write_text("\n".join(text) + "\n")
        written.append(dist.expected_list)
    return written


def file_list_problems(artifact: Path) -> list[str]:
    """The difference between an artifact's files and its committed expected list."""
    dist, kind = distribution_of(artifact), kind_of(artifact)
    if not dist.expected_list.exists():
        return [f"{artifact.name}: no expected list {dist.expected_list.relative_to(REPO)} (--write-expected writes it)"]
    expected = set(read_expected(dist).get(kind, []))
    actual = set(artifact_files(artifact))
    return ([f"{artifact.name}: not in the expected list: {name}" for name in sorted(actual - expected)]
            + [f"{artifact.name}: missing (the expected list names it): {name}" for name in sorted(expected - actual)])


def _metadata(artifact: Path) -> tuple[str, str]:
    """The core metadata text of a wheel (``METADATA``) or an sdist (``PKG-INFO``), and its name."""
    if kind_of(artifact) == "wheel":
        with zipfile.ZipFile(artifact) as wheel:
            (name,) = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            return wheel.read(name).decode(), name
    with tarfile.open(artifact) as sdist:
        (member,) = [m for m in sdist.getmembers() if re.fullmatch(r"[^/]+/PKG-INFO", m.name)]
        file = sdist.extractfile(member)
        assert file is not None
        return file.read().decode(), member.name


def metadata_problems(artifact: Path) -> list[str]:
    """Name, version and license expression as the distribution's pyproject.toml declares them."""
    dist = distribution_of(artifact)
    text, where = _metadata(artifact)
    meta = email.parser.Parser().parsestr(text, headersonly=True)
    project = tomllib.loads((dist.source / "pyproject.toml").read_text())["project"]
    problems = []
    for field, declared in (("Name", project["name"]), ("Version", project["version"]),
                            ("Requires-Python", project["requires-python"]), ("License-Expression", project["license"])):
        if meta.get(field) != declared:
            problems.append(f"{artifact.name}: {where} says {field}: {meta.get(field)!r}, pyproject.toml {declared!r}")
    if not artifact.name.startswith(f"{dist.stem}-{project['version']}"):
        problems.append(f"{artifact.name}: the file name does not carry version {project['version']}")
    return problems


def license_problems(artifact: Path) -> list[str]:
    """The Apache License text, as a regular file: at the sdist's top, in the wheel's ``dist-info/licenses/``."""
    license_text = (REPO / "LICENSE").read_bytes()
    if kind_of(artifact) == "wheel":
        with zipfile.ZipFile(artifact) as wheel:
            found = [n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/licenses/LICENSE", n)]
            content = wheel.read(found[0]) if found else None
    else:
        with tarfile.open(artifact) as sdist:
            members = [m for m in sdist.getmembers() if re.fullmatch(r"[^/]+/LICENSE", m.name)]
            if members and not members[0].isfile():
                return [f"{artifact.name}: LICENSE is a link to {members[0].linkname!r}, not the file"]
            file = sdist.extractfile(members[0]) if members else None
            content = file.read() if file else None
    if content is None:
        return [f"{artifact.name}: no LICENSE"]
    text = content.decode(errors="replace")
    if content != license_text or not all(marker in text for marker in LICENSE_MARKERS):
        return [f"{artifact.name}: LICENSE is not the repository's Apache License text"]
    return []


def checkout_reference_problems(artifact: Path) -> list[str]:
    """Modules of the wheel that name a path of a checkout (only for distributions that ask for the scan)."""
    if kind_of(artifact) != "wheel" or not distribution_of(artifact).scan_for_checkout_references:
        return []
    problems = []
    with zipfile.ZipFile(artifact) as wheel:
        for name in wheel.namelist():
            if not name.endswith(".py"):
                continue
            for number, line in enumerate(wheel.read(name).decode().splitlines(), 1):
                for what, pattern in CHECKOUT_REFERENCES.items():
                    if pattern.search(line):
                        problems.append(f"{artifact.name}: {name}:{number} names {what}: {line.strip()}")
    return problems


def project_url_problems(artifact: Path) -> list[str]:
    """The project URLs the package index shows: each of :data:`PROJECT_URLS` set, to an ``https://`` address."""
    text, where = _metadata(artifact)
    urls = dict(value.split(", ", 1) for value in email.parser.Parser().parsestr(text, headersonly=True).get_all(
        "Project-URL", []) if ", " in value)
    return [f"{artifact.name}: {where} has no Project-URL {label!r} (pyproject.toml's [project.urls])"
            for label in PROJECT_URLS if not urls.get(label, "").startswith("https://")]


def site_page(url: str) -> Path | None:
    """The file of ``docs/`` a documentation site address shows (``<site>ingestion/`` is ``docs/ingestion.md``,
    ``<site>how-it-works.svg`` is ``docs/how-it-works.svg``)."""
    route = urlsplit(url).path.removeprefix(urlsplit(SITE).path).strip("/")
    for candidate in (f"{route}.md", f"{route}/index.md", route) if route else ("index.md",):  # a page, or a file
        if (REPO / "docs" / candidate).is_file():
            return REPO / "docs" / candidate
    return None


def link_problems(description: str, name: str) -> list[str]:
    """Each link of a long description that does not resolve on the package index, with why."""
    problems = []
    for match in doc_links.LINK.finditer(doc_links.prose_of(description)):
        target = match["target"]
        url, _, anchor = target.partition("#")
        if not url:
            headings = {doc_links.slug(line.lstrip("#")) for line in doc_links.FENCE.sub("", description).splitlines()
                        if line.startswith("#")}
            if anchor not in headings:
                problems.append(f"{name}: the long description links #{anchor}, which is none of its headings")
        elif not url.startswith("https://"):
            problems.append(f"{name}: the long description links {target!r}, which does not resolve on the package "
                            f"index: link the documentation site ({SITE}...) or another https:// address")
        elif url.startswith(SITE):
            page = site_page(url)
            if page is None:
                problems.append(f"{name}: the long description links {target!r}, a page the documentation site "
                                f"does not have (no docs/ file for it)")
            elif anchor and (page.suffix != ".md" or anchor not in doc_links.anchors_of(page)):
                problems.append(f"{name}: the long description links {target!r}: "
                                f"{page.relative_to(REPO)} has no heading #{anchor}")
    return problems


def long_description_problems(artifact: Path) -> list[str]:
    """:func:`link_problems` of the long description an artifact's metadata carries."""
    text, _ = _metadata(artifact)
    return link_problems(email.parser.Parser().parsestr(text).get_payload(), artifact.name)


def twine_problems(artifacts: Sequence[Path]) -> list[str]:
    """``twine check --strict``: each artifact's metadata and long description render."""
    run = subprocess.run([sys.executable, "-m", "twine", "--no-color", "check", "--strict", *map(str, artifacts)],
                         capture_output=True, text=True, timeout=300)
    if run.returncode == 0:
        return []
    output = "\n".join(line.rstrip() for line in (run.stdout + run.stderr).splitlines() if line.strip())
    return [f"twine check --strict failed:\n{output}"]


def check(artifacts: Sequence[Path]) -> list[str]:
    """Every finding about the built artifacts (an empty list: they may be released).

    ``artifacts`` must hold each distribution's sdist and wheel.
    """
    artifacts = sorted(artifacts)
    problems = []
    present = {(distribution_of(a).name, kind_of(a)) for a in artifacts}
    for dist in DISTRIBUTIONS:
        for kind in ("sdist", "wheel"):
            if (dist.name, kind) not in present:
                problems.append(f"{dist.name}: no {kind} among {[a.name for a in artifacts]}")
    for artifact in artifacts:
        problems += metadata_problems(artifact)
        problems += license_problems(artifact)
        problems += file_list_problems(artifact)
        problems += checkout_reference_problems(artifact)
        problems += project_url_problems(artifact)
        problems += long_description_problems(artifact)
    return problems + twine_problems(artifacts)


def main(argv: Sequence[str] | None = None) -> int:
    """Build (or take) the artifacts, check them, print the findings; 1 if there is one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to build (emptied first); default .local/dist")
    parser.add_argument("--no-build", type=Path, metavar="DIR", help="check the artifacts in DIR, build nothing")
    parser.add_argument("--write-expected", action="store_true", help="write scripts/release/*.files from the build")
    args = parser.parse_args(argv)
    if args.no_build:
        artifacts, warnings = artifacts_in(args.no_build), []
    else:
        artifacts, warnings = build(args.out)
    if args.write_expected:
        for path in write_expected(artifacts):
            print(f"wrote {path.relative_to(REPO)}")
    problems = warnings + check(artifacts)
    for artifact in artifacts:
        print(f"built {artifact}" if not args.no_build else f"checked {artifact}")
    if problems:
        print(f"\n{len(problems)} finding(s):", file=sys.stderr)
        for problem in problems:
            print(f"- {problem}", file=sys.stderr)
        return 1
    print("the artifacts may be released: metadata, descriptions, file lists and licenses as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
