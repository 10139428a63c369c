"""A publisher SIGKILLed at every protocol step boundary, or hit by the endpoint's faults, then run
again: reading the hub back finds every event exactly once, in eh.seq order."""

from __future__ import annotations

import json
import signal
from collections import Counter

import pytest

from publish_kit import PublishSetup, assert_exactly_once, batch, events_for

# 350 events of ~3 KB on each of two partitions: two SDK batches per partition, so mid_send:1 cuts a send in half.
EVENTS = events_for("c", 700, partitions=2, size=3000)

CRASHES = {
    "after_claim": "published",
    "after_intent": "recovered",
    "mid_send:1": "recovered",
    "after_send": "recovered",
    "after_commit_records": "already_committed",  # the records were written, the state not: the retry completes it
    "during_commit": "already_committed",
}


def test_retry_after_crash_at_each_step_publishes_each_event_once(setup: PublishSetup) -> None:
    # One hub per crash point, all crashed in parallel, then all retried: one lease expiry to wait for.
    hubs = {point: setup.hub if i == 0 else f"{setup.hub[:40]}-{i}" for i, point in enumerate(CRASHES)}
    for point, name in hubs.items():
        if name != setup.hub:
            setup.event_hubs.admin.create_hub(name, partitions=4)
    setups = {point: PublishSetup(setup.event_hubs, setup.azurite, name, setup.container_name) for point, name in hubs.items()}
    crashed = {point: s.start(EVENTS, batch("crash"), crash_at=point) for point, s in setups.items()}
    for point, proc in crashed.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL, f"{point}: exit {proc.returncode}\n{err[-2000:]}"
    # the crashes left in-doubt sends behind: a whole partition's send after the send (each partition runs
    # on a thread of its own, so the other one is cut wherever it was), part of one mid-send
    per_partition = Counter(e.partition for e in setups["after_send"].read_back())
    assert len(EVENTS) // 2 in per_partition.values(), per_partition
    assert 0 < len(setups["mid_send:1"].read_back()) < len(EVENTS)
    retried = {point: s.start(EVENTS, batch("crash"), claim_timeout=40) for point, s in setups.items()}
    for point, proc in retried.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{point}: exit {proc.returncode}\n{err[-3000:]}"
        assert_exactly_once(setups[point].read_back(), EVENTS)
        statuses = {r["status"] for r in json.loads(out.strip().splitlines()[-1]).values()}
        assert CRASHES[point] in statuses, (point, statuses)
        publisher = setups[point].publisher()
        for pid in ("0", "1"):  # every partition's ledger counts the batch once, nothing left in doubt
            state = publisher.store.read(publisher._key(pid))
            assert (state.pending, state.ledger.count, state.ledger.last.batch_id) == (None, 1, batch("crash")), (point, pid)


@pytest.mark.parametrize(
    ("fault", "params"),
    [("store_no_ack", {}), ("delay_ack", {"ms": 3000}), ("server_busy", {}), ("drop_after", {"transfers": 3})],
)
def test_send_faults_then_retry_publish_each_event_once(setup: PublishSetup, fault: str, params: dict) -> None:
    events = events_for(fault, 800, size=2000)
    setup.event_hubs.admin.set_fault(fault, hub=setup.hub, **params)
    # The first run either recovers in-process (a failed send is followed by read-back) or fails.
    try:
        setup.publisher(send_timeout=1.5, send_attempts=2).publish(events, batch_id=batch(fault))
    except Exception:
        pass
    left = setup.event_hubs.admin.faults()  # a one-shot fault disappears once it fired
    assert all(f["triggered"] > 0 for f in left), f"the fault must have hit a send: {left}"
    setup.event_hubs.admin.clear_faults()
    code, result, err = setup.run(events, batch(fault), claim_timeout=40)
    assert code == 0, err[-3000:]
    assert_exactly_once(setup.read_back(), events)
    assert sum(r["events"] for r in result.values()) == len(events)
