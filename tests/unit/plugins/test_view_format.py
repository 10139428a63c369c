"""The view's formatting for people (``static/format.js``), run under node: relative times with the exact time,
intervals as their schedule names them, durations, numbers with separators."""

from __future__ import annotations

import json
import subprocess

from airflow_provider_eh.plugins.app import STATIC

CASES = [
    # (function, arguments, expected)
    ("relative", ["2026-11-24T09:00:00+00:00", "2026-11-24T09:04:10+00:00"], "4 min ago"),
    ("relative", ["2026-11-24T09:00:00+00:00", "2026-11-24T09:00:02+00:00"], "just now"),
    ("relative", ["2026-11-24T09:00:00+00:00", "2026-11-24T09:00:40+00:00"], "40 s ago"),
    ("relative", ["2026-11-24T09:00:00+00:00", "2026-11-24T12:10:00+00:00"], "3 h ago"),
    ("relative", ["2026-11-24T09:00:00+00:00", "2026-11-27T09:00:00+00:00"], "3 d ago"),
    ("relative", ["2026-11-24T11:00:00+00:00", "2026-11-24T09:00:00+00:00"], "in 2 h"),
    ("relative", [None, "2026-11-24T09:00:00+00:00"], ""),
    ("interval", ["2026-11-24T00:00:00+00:00", "2026-11-25T00:00:00+00:00"], "2026-11-24"),
    ("interval", ["2026-11-24T09:00:00+00:00", "2026-11-24T10:00:00+00:00"], "2026-11-24 09:00–10:00"),
    ("interval", ["2026-11-24T23:00:00+00:00", "2026-11-25T00:00:00+00:00"], "2026-11-24 23:00–24:00"),
    ("interval", ["2026-11-01T00:00:00+00:00", "2026-12-01T00:00:00+00:00"], "2026-11"),
    ("interval", ["2026-01-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"], "2026"),
    ("interval", ["2026-11-23T00:00:00+00:00", "2026-11-30T00:00:00+00:00"], "2026-11-23 – 2026-11-30"),
    ("interval", ["2026-11-24T09:15:00+00:00", "2026-11-25T10:00:00+00:00"], "2026-11-24 09:15 – 2026-11-25 10:00"),
    ("interval", ["2026-11-02T00:00:00+00:00", "2026-11-02T00:00:00+00:00"], "2026-11-02 00:00"),
    ("duration", [0.42], "0.4 s"),
    ("duration", [45], "45 s"),
    ("duration", [125], "2 min 5 s"),
    ("duration", [1500], "25 min"),
    ("duration", [5400], "1.5 h"),
    ("duration", [266400], "3 d 2 h"),
    ("duration", [None], "unknown"),
    ("number", [1234567], "1,234,567"),
    ("number", [0], "0"),
    ("number", [None], ""),
]

SCRIPT = """
const F = require(process.argv[1]);
const cases = JSON.parse(process.argv[2]);
console.log(JSON.stringify(cases.map(([fn, args]) => F[fn](...args))));
"""


def _node(script: str, *args: str, tz: str = "UTC") -> str:
    proc = subprocess.run(["node", "-e", script, str(STATIC / "format.js"), *args], capture_output=True, text=True,
                          timeout=30, env={"TZ": tz, "PATH": "/usr/bin:/bin:/usr/local/bin"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_times_intervals_durations_and_numbers_read_as_people_write_them() -> None:
    got = json.loads(_node(SCRIPT, json.dumps([[fn, args] for fn, args, _ in CASES])))
    assert [(fn, args, g) for (fn, args, _), g in zip(CASES, got, strict=True)] == [(fn, args, e) for fn, args, e in CASES]


def test_the_exact_time_on_hover_is_the_apis_value_in_utc_and_in_local_time() -> None:
    script = 'console.log(JSON.stringify(require(process.argv[1]).exact("2026-11-24T09:08:53.180471+00:00")))'
    berlin = json.loads(_node(script, tz="Europe/Berlin"))
    assert berlin == ("2026-11-24T09:08:53.180471+00:00\nUTC: 2026-11-24 09:08:53\nlocal: 2026-11-24 10:08:53 UTC+01:00")
    assert json.loads(_node(script, tz="America/New_York")).endswith("\nlocal: 2026-11-24 04:08:53 UTC-05:00")


def test_the_page_loads_the_formatting_before_its_script() -> None:
    page = (STATIC / "view.html").read_text()
    assert page.index("static/format.js") < page.index("static/view.js")
