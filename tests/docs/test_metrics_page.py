"""docs/metrics.md lists exactly the metrics of ``airflow_provider_eh.metrics.METRICS``, with their kind, unit,
tags and meaning, and the site lists the page."""

from __future__ import annotations

import re
from pathlib import Path

from airflow_provider_eh.metrics import METRICS, Metric

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "metrics.md"
BEGIN = "<!-- metrics-table: checked against airflow_provider_eh.metrics.METRICS by tests/docs/test_metrics_page.py -->"
END = "<!-- /metrics-table -->"
ROW = re.compile(r"^\| `(?P<name>[\w.]+)` \| (?P<kind>\w+) \| (?P<unit>\w+) \| (?P<tags>[^|]*) \| (?P<meaning>.*) \|$")


def row(metric: Metric) -> str:
    """The page's row of one metric."""
    tags = ", ".join(f"`{tag}`" for tag in metric.tags)
    return f"| `{metric.name}` | {metric.kind} | {metric.unit} | {tags} | {metric.meaning} |"


def table() -> str:
    """The table the page must hold between its markers, in the order of ``METRICS``."""
    return "\n".join(["| metric | kind | unit | tags | meaning |", "| --- | --- | --- | --- | --- |",
                      *(row(m) for m in METRICS.values())])


def page_table() -> str:
    head, begin, rest = PAGE.read_text().partition(BEGIN)
    held, end, _ = rest.partition(END)
    assert begin and end, f"docs/metrics.md lacks the markers {BEGIN} and {END}"
    return held.strip("\n")


def test_the_page_holds_the_table_of_every_metric_with_its_tags() -> None:
    assert page_table() == table(), "docs/metrics.md differs from METRICS; the table it must hold:\n" + table()


def test_the_pages_rows_name_exactly_the_metrics_and_their_tags() -> None:
    """Read back from the page as a reader sees it: each name once, with the metric's tags, nothing else."""
    rows = [ROW.match(line) for line in page_table().splitlines()[2:]]
    assert all(rows), "a row of the table does not read as | `name` | kind | unit | tags | meaning |"
    listed = {m["name"]: tuple(re.findall(r"`(\w+)`", m["tags"])) for m in rows if m}
    assert len(listed) == len(rows)
    assert listed == {name: metric.tags for name, metric in METRICS.items()}


def test_a_metric_missing_from_the_page_is_found() -> None:
    """The check of the check: the table without one metric, or with a tag dropped, is not the one wanted."""
    first, *rest = METRICS.values()
    assert "\n".join(["| metric | kind | unit | tags | meaning |", "| --- | --- | --- | --- | --- |",
                      *(row(m) for m in rest)]) != table()
    assert row(Metric(first.name, first.kind, first.unit, first.tags[:-1], first.meaning)) not in table()


def test_the_site_and_the_home_page_list_the_metrics_page() -> None:
    assert "Metrics: metrics.md" in (REPO / "mkdocs.yml").read_text()
    assert "[Metrics](metrics.md)" in (REPO / "docs" / "index.md").read_text()
