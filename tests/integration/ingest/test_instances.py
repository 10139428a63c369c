"""Two instances (as mapped task instances would be) share a hub's partitions through ownership blobs."""

from __future__ import annotations

import signal
import time
from collections import Counter, defaultdict

from conftest import publish, stamped, table_rows, trace

PER_PARTITION = 40
EXPIRY = 6


def busy_intervals(lines):
    """(owner, partition) -> list of [start, end] of each batch, from received to committed."""
    spans = defaultdict(list)
    open_at = {}
    for line in lines:
        key = (line["owner"], line["partition"])
        if line["stage"] == "received":
            open_at[key] = line["t"]
        elif line["stage"] == "committed" and key in open_at:
            spans[key].append((open_at.pop(key), line["t"]))
    for key, start in open_at.items():  # a batch cut short by the kill
        spans[key].append((start, start + 1))
    return spans


def test_two_instances_split_partitions_and_survivor_takes_over_after_expiry(run_worker, eh_conn_str, sink_db, tmp_path):
    publish(eh_conn_str, {p: stamped(p, PER_PARTITION) for p in "0123"})
    limits = {"batch_size": 5, "max_wait_time": 0.3, "max_duration": 120, "ownership_expiry": EXPIRY,
              "poll_interval": 0.5, "instances": 2}
    survivor = run_worker(wait=False, owner="i0", limits=limits, pause=0.05)
    victim = run_worker(wait=False, owner="i1", limits=limits, pause=0.05)
    try:
        deadline = time.time() + 60
        while not any(t["owner"] == "i1" and t["stage"] == "committed" for t in trace(tmp_path)):
            assert time.time() < deadline and victim.poll() is None, "instance i1 never committed a batch"
            time.sleep(0.1)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed_at = time.time()
        out, err = survivor.communicate(timeout=300)
    finally:
        for proc in (survivor, victim):
            if proc.poll() is None:
                proc.kill()
    assert survivor.returncode == 0, err[-3000:]

    lines = trace(tmp_path)
    by_owner = defaultdict(set)
    for line in lines:
        by_owner[line["owner"]].add(line["partition"])
    before_kill = {line["partition"] for line in lines if line["owner"] == "i0" and line["t"] < killed_at}
    assert by_owner["i1"] and before_kill.isdisjoint(by_owner["i1"]), "the instances did not split the partitions"
    taken_over = sorted(p for p in by_owner["i1"] if p in by_owner["i0"])
    assert taken_over, "the survivor never took the dead instance's partitions over"
    # A takeover is the survivor's first write; a link still open on a partition the survivor no
    # longer owns may receive a batch, which its commit then discards (fenced by the claim).
    first_takeover = min(
        l["t"] for l in lines if l["owner"] == "i0" and l["partition"] in taken_over and l["stage"] == "rows_written"
    )
    last_victim = max(l["t"] for l in lines if l["owner"] == "i1")
    assert first_takeover - last_victim >= EXPIRY - 1.5, "a live claim was taken over before it expired"

    spans = busy_intervals(lines)
    for p in "0123":
        mine, theirs = spans.get(("i0", p), []), spans.get(("i1", p), [])
        assert not any(a0 < b1 and a1 < b0 for a0, b0 in mine for a1, b1 in theirs), f"partition {p} processed twice at once"

    counts = Counter(r[0] for r in table_rows(sink_db))
    assert len(counts) == 4 * PER_PARTITION and max(counts.values()) == 1
