"""A Spark publish killed at each protocol step, on the driver (the task's process, SIGKILLed) and on an
executor (a Python worker SIGKILLed mid-send), or hit by each of the endpoint's send faults, then run
again: reading the hub back finds every row exactly once. Each crash is a child process owning its own
``local[2]`` session, all crashing at once; the faulted runs and the re-runs use the test's session.
The crash on an executor publishes 10,000 rows (three SDK batches a partition, so that it cuts a send
short); the crashes on the driver, 1,000 (one SDK batch a partition is all they need)."""

from __future__ import annotations

import json
import signal
from collections import Counter
from typing import Any

import pytest
from spark_kit import SparkSetup, batch, write_orders

from airflow_provider_eh.errors import EventHubsProviderError

ROWS = 10_000
# ~1 KB rows: each partition's ~2,500 events take 3 SDK batches, so mid_send:2 cuts a send short.
PAD = 1000
# The crashes on the driver need no more than one SDK batch per partition: an output of their own, a tenth
# the size (what the children, the re-runs and the read-backs send and read is most of the test's time)
DRIVER_ROWS = 1000

CRASHES = {  # crash point -> status the re-run reports for some partition
    "after_claim": "published",  # a lease and nothing else: the re-run waits for it and publishes afresh
    "after_intent": "recovered",
    "mid_send:2": "recovered",  # on an executor: the job fails, the driver exits with an error
    "after_send": "recovered",
    "during_commit": "already_committed",
}


def test_rerun_after_driver_or_executor_killed_at_each_step_publishes_each_row_once(spark: Any, setup: SparkSetup) -> None:
    big = write_orders(spark, str(setup.tmp / "orders"), ROWS, pad=PAD)
    small = write_orders(spark, str(setup.tmp / "driver-orders"), DRIVER_ROWS, pad=PAD)
    output = {point: (big, ROWS) if point.startswith("mid_send") else (small, DRIVER_ROWS) for point in CRASHES}
    setups = {}
    for i, point in enumerate(CRASHES):
        name = setup.hub if i == 0 else f"{setup.hub[:40]}-{i}"
        if name != setup.hub:
            setup.event_hubs.admin.create_hub(name, partitions=4)
        setups[point] = SparkSetup(setup.event_hubs, setup.azurite, name, setup.container_name, setup.tmp)

    crashed = {point: s.start(output[point][0], batch("crash"), crash_at=point) for point, s in setups.items()}
    for point, proc in crashed.items():
        out, err = proc.communicate(timeout=600)
        if point.startswith("mid_send"):  # the executor died; the driver saw the job fail and exited
            assert proc.returncode not in (0, -signal.SIGKILL), f"{point}: exit {proc.returncode}\n{err[-3000:]}"
            assert "Python worker exited unexpectedly" in err or "crashed" in err, err[-3000:]
        else:
            assert proc.returncode == -signal.SIGKILL, f"{point}: exit {proc.returncode}\n{err[-3000:]}"
    landed = {point: sum(end + 1 for end in s.ends().values()) for point, s in setups.items()}
    assert landed["after_claim"] == 0 and landed["after_intent"] == 0
    assert landed["after_send"] == DRIVER_ROWS and landed["during_commit"] == DRIVER_ROWS
    assert 0 < landed["mid_send:2"] < ROWS, landed

    # the re-run, as a retry on another worker would: here in the test's process and session
    for point, s in setups.items():
        path, rows = output[point]
        results = s.publish(spark, path, batch("crash"), claim_timeout=40)
        read = s.read_back()
        ids = Counter(json.loads(e.body)["id"] for e in read)
        assert len(ids) == rows and set(ids.values()) == {1}, f"{point}: {len(read)} events, {len(ids)} distinct"
        statuses = {r.status for r in results.values()}
        assert CRASHES[point] in statuses, (point, statuses)


# The endpoint's faults, as the local path's fault matrix (tests/integration/publishing/test_publish_crash_recovery.py)
FAULTS = [("store_no_ack", {}), ("delay_ack", {"ms": 3000}), ("server_busy", {}), ("drop_after", {"transfers": 3})]
FAULT_ROWS = 800  # ~2 KB rows: one SDK batch per partition, as in the local matrix


@pytest.mark.parametrize(("fault", "params"), FAULTS, ids=[f for f, _ in FAULTS])
def test_send_faults_then_rerun_publish_each_row_once(spark: Any, setup: SparkSetup, fault: str, params: dict) -> None:
    path = write_orders(spark, str(setup.tmp / "orders"), FAULT_ROWS, pad=2000, files=2)
    setup.event_hubs.admin.set_fault(fault, hub=setup.hub, **params)
    # The first run either recovers in-process (a failed send is followed by read-back) or fails.
    try:
        first: dict[str, Any] | None = setup.publish(spark, path, batch(fault), send_timeout=1.5, send_attempts=2)
    except EventHubsProviderError:
        first = None
    finally:
        left = setup.event_hubs.admin.faults()  # a one-shot fault disappears once it fired
        setup.event_hubs.admin.clear_faults()
    assert all(f["triggered"] > 0 for f in left), f"the fault must have hit a send: {left}"
    results = setup.publish(spark, path, batch(fault), claim_timeout=40)
    ids = Counter(json.loads(e.body)["id"] for e in setup.read_back())
    assert len(ids) == FAULT_ROWS and set(ids.values()) == {1}, f"{sum(ids.values())} events, {len(ids)} distinct"
    assert sum(r.events for r in results.values()) == FAULT_ROWS
    if first is not None:  # recovered in-process: the re-run finds every partition committed
        assert {r.status for r in results.values()} == {"already_committed"}
