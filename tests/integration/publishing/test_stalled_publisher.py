"""A publisher that stalls (paused, not crashed) while another takes over sends no more once it resumes.

The first publisher is a real process, stopped with SIGSTOP after its first SDK batch was
acknowledged (``pause_at("mid_send:1")``), as a frozen VM or a long GC pause stops one. Its blob
lease runs out while it is stopped; a second publisher of the same batch waits that out, claims,
recovers by read-back and commits. Then the first is resumed: its claim's deadline has passed, so it
stops before its next SDK batch instead of sending what the second one already sent. The hub is
read back and every event counted.
"""

from __future__ import annotations

import signal
from typing import Any

from publish_kit import assert_exactly_once, batch, events_for

from tests.support.paused import wait_stopped


def test_publisher_paused_past_its_lease_sends_nothing_after_a_takeover_and_each_event_lands_once(setup: Any) -> None:
    # one partition, ~4 MB: several SDK batches of at most 1 MiB, so the paused one has batches left to send
    events = events_for("stall", 8000, partitions=1, size=480)
    batch_id = batch("stalled")
    first = setup.start(events, batch_id, pause_at="mid_send:1")
    try:
        wait_stopped(first.pid)
        landed_before = len(setup.read_back())
        assert 0 < landed_before < len(events), "the pause must come after one SDK batch and before the last"

        taker = setup.publisher(claim_timeout=60)  # waits for the stopped holder's lease to run out
        result = taker.publish(events, batch_id=batch_id)["0"]
        assert (result.status, result.landed_count, result.resent) == (
            "recovered", landed_before, len(events) - landed_before)  # it resent only what had not landed
    finally:
        first.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=120)

    assert first.returncode != 0, f"the resumed publisher must stop, not finish: {out[-500:]}"
    assert "ProducerDisconnectedError" in err and "deadline passed" in err, err[-3000:]
    assert_exactly_once(setup.read_back(), events)
