"""A short chaos run in CI: randomized publishes SIGKILLed at seeded protocol steps, paused (SIGSTOP,
some past their lease while a retry takes over) or hit by endpoint faults that are held until they
fire, retried until they succeed beside a concurrent backfill; the
hubs read back hold every event once. One of the runs goes through the Spark path (its driver and
executors in a session of their own), disrupted like the others, so both paths of the one engine
are under faults. Nothing depends on the machine's speed: a disruption that did not take effect is
made again, and the test counts runs actually disrupted.

The long run (``python bench/chaos.py --runs 200``) is bench/README.md's figure; this one keeps CI short.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_chaos() -> Any:
    """``bench/chaos.py`` as the module ``chaos``: its attempts fork from a fork server that imports it by name."""
    bench = str(REPO / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import chaos

    return chaos


@pytest.mark.slow
def test_killed_and_faulted_runs_retried_beside_a_backfill_publish_each_event_once(
    event_hubs: Any, azurite: Any, airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chaos = load_chaos()
    monkeypatch.setenv("AIRFLOW__CORE__FERNET_KEY", chaos.FERNET_KEY)
    started = time.monotonic()
    figures = chaos.run_chaos(event_hubs, azurite, runs=12, seed=20260310, workers=8, variable_share=0.3,
                              work_dir=tmp_path, tag=f"ci{int(started) % 100000}", partition_counts=(1, 2, 3, 5, 8),
                              blob_groups=3, spark_runs=1)
    print(f"chaos figures: {figures}")
    assert figures["runs"] == 12
    assert figures["disrupted"] == 12, f"every run must have been killed or faulted at least once: {figures}"
    assert figures["kills"] > 0 and figures["faults"] > 0, figures
    # paused (SIGSTOP) attempts, some continued only after a retry had taken their partitions over
    assert figures["pauses"] > 0 and figures["long_pauses"] > 0, figures
    assert (figures["spark_runs"], figures["spark_disrupted"]) == (1, 1), figures
    assert figures["events"] > 0 and figures["read"] >= figures["events"]
    assert (figures["duplicates"], figures["losses"]) == (0, 0), figures
    assert (figures["unexpected"], figures["misplaced"], figures["stamp_breaks"]) == (0, 0, 0), figures
