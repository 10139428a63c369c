"""Named crash points at the protocol's step boundaries, for crash tests; inert unless selected.

``AIRFLOW_PROVIDER_EH_CRASH_AT`` selects one point: ``after_claim``, ``after_intent``,
``mid_send:K`` (after K SDK batches of a partition were acknowledged), ``after_send`` (everything
sent, nothing committed) or ``during_commit`` (the commit written, the lease not yet released).
At that point the process kills itself with SIGKILL: no ``finally`` block, no lease release, no
flush, exactly like a worker lost to the OOM killer.
"""

from __future__ import annotations

import os
import signal

ENV = "AIRFLOW_PROVIDER_EH_CRASH_AT"
POINTS = ("after_claim", "after_intent", "mid_send", "after_send", "during_commit")


def _selected() -> tuple[str, int] | None:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    name, _, count = raw.partition(":")
    if name not in POINTS:
        raise ValueError(f"{ENV}={raw!r}: unknown crash point; choose one of {', '.join(POINTS)}")
    return name, int(count or 0)


def crash_point(name: str, count: int = 0) -> None:
    """SIGKILL this process when ``name`` (and, for ``mid_send``, ``count``) is the selected point."""
    selected = _selected()
    if selected is None or selected[0] != name or (name == "mid_send" and selected[1] != count):
        return
    os.kill(os.getpid(), signal.SIGKILL)
