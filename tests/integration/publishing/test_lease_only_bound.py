"""``lease_only_batch_bytes``: what a stalled publisher can land twice where the lease alone fences it.

On an endpoint started without idempotent-producer links (``--no-idempotent-producers``), a publisher
in its own process stops itself (SIGSTOP) after its claim check of its second SDK batch and before
that batch goes out; a second publisher of the same batch waits out the stopped one's lease, takes
over, reads back what landed and resends the rest; then the first is continued, sends the batch it
had checked for, and stops at its next check. The hub is read back and the events that are in it
twice counted: one run of consecutive events, at most the bound's bytes, fewer with a smaller bound.
Two publishers stall side by side (the default bound and a small one, each on its own hub), so the
lease's wait is paid once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from publish_kit import REPO, PublishSetup, batch, events_for

from airflow_provider_eh.publishing.in_flight import DEFAULT_LEASE_ONLY_BATCH_BYTES
from airflow_provider_eh.publishing.plan import PartitionResult
from eventhubs_local import EmulatorProcess
from tests.conftest import unique_name
from tests.support.paused import wait_stopped

RUNNER = Path(__file__).with_name("stall_runner.py")
SMALL = 16 * 1024
SIZE = 400  # body bytes of each event


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[EmulatorProcess]:
    """An endpoint that does not offer idempotent producers: every send is fenced by the lease alone."""
    with EmulatorProcess(tmp_path / "no-fencing", extra_args=["--no-idempotent-producers"]) as endpoint:
        yield endpoint


def _stalled(setup: PublishSetup, events: list[dict[str, Any]], batch_id: str, bound: int,
             tmp_path: Path) -> subprocess.Popen[str]:
    config = {"eh": setup.event_hubs.connection_string(setup.hub), "hub": setup.hub,
              "blob": setup.azurite.connection_string, "container": setup.container_name, "group": "g",
              "batch_id": batch_id, "events": events, "lease_only_batch_bytes": bound, "stop_before": 2}
    path = tmp_path / f"stall-{bound}.json"
    path.write_text(json.dumps(config))
    return subprocess.Popen([sys.executable, str(RUNNER), str(path)], text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})


def _twice(setup: PublishSetup, events: list[dict[str, Any]]) -> list[int]:
    """The indexes of the events that are in the hub twice (checking that none is missing or there more often)."""
    copies = Counter(json.loads(e.body)["id"] for e in setup.read_back())
    assert set(copies) == {e["body"]["id"] for e in events}, "an event is missing"
    assert set(copies.values()) <= {1, 2}, copies.most_common(3)
    return sorted(int(i.rsplit("-", 1)[1]) for i, n in copies.items() if n == 2)


def test_a_stall_mid_send_lands_at_most_the_bound_twice_and_a_smaller_bound_fewer(
        plain: EmulatorProcess, azurite: Any, container: str, tmp_path: Path) -> None:
    bounds = (DEFAULT_LEASE_ONLY_BATCH_BYTES, SMALL)
    # ~600 KB on one partition: three SDK batches under the default bound, so batch 2 exists under both
    events = events_for("bound", 1500, partitions=1, size=SIZE)
    body_bytes = {e["body"]["id"]: len(json.dumps(e["body"], separators=(",", ":"))) for e in events}
    setups = {}
    for bound in bounds:
        hub = unique_name("lease")
        plain.admin.create_hub(hub, partitions=1)
        setups[bound] = PublishSetup(plain, azurite, hub, container)
    batch_id = batch("lease-bound")
    stalled = {bound: _stalled(setups[bound], events, batch_id, bound, tmp_path) for bound in bounds}
    try:
        for proc in stalled.values():
            wait_stopped(proc.pid)
        landed_before = {bound: len(setups[bound].read_back()) for bound in bounds}

        def take_over(bound: int) -> PartitionResult:
            taker = setups[bound].publisher(claim_timeout=60, lease_only_batch_bytes=bound)
            return taker.publish(events, batch_id=batch_id)["0"]

        with ThreadPoolExecutor(max_workers=len(bounds)) as pool:
            taken = dict(zip(bounds, pool.map(take_over, bounds), strict=True))
    finally:
        for proc in stalled.values():
            proc.send_signal(signal.SIGCONT)
    errors = {bound: proc.communicate(timeout=120)[1] for bound, proc in stalled.items()}

    twice: dict[int, list[int]] = {}
    for bound in bounds:
        result = taken[bound]
        assert (result.status, result.fencing, result.lease_only_batch_bytes) == ("recovered", "lease", bound)
        assert result.landed_count == landed_before[bound] > 0  # the stop came after batch 1, before batch 2
        assert stalled[bound].returncode != 0 and "deadline passed" in errors[bound], errors[bound][-2000:]
        twice[bound] = _twice(setups[bound], events)
        # the batch in flight at the stop, and nothing after it: one run of consecutive events, within the bound
        assert twice[bound] == list(range(landed_before[bound], landed_before[bound] + len(twice[bound])))
        assert sum(body_bytes[f"bound-{i}"] for i in twice[bound]) <= bound
    assert 0 < len(twice[SMALL]) < len(twice[DEFAULT_LEASE_ONLY_BATCH_BYTES]), twice

    # the bound is the ledger's: a re-run returns it as it was recorded
    again = setups[SMALL].publisher(lease_only_batch_bytes=DEFAULT_LEASE_ONLY_BATCH_BYTES).publish(
        events, batch_id=batch_id)["0"]
    assert (again.status, again.fencing, again.lease_only_batch_bytes) == ("already_committed", "lease", SMALL)


def _sdk_batches(caplog: pytest.LogCaptureFixture) -> int:
    """How many SDK batches the one send logged (its closing line: "N events sent in K SDK batches")."""
    (done,) = [r.getMessage() for r in caplog.records if "SDK batches," in r.getMessage()]
    return int(done.split(" events sent in ")[1].split()[0])


def test_the_hubs_fencing_sends_batches_of_the_links_size_and_reports_no_bound(
        setup: PublishSetup, caplog: pytest.LogCaptureFixture) -> None:
    events = events_for("hub-bound", 3000, partitions=1, size=SIZE)  # ~1.3 MB: two SDK batches of the link's size
    with caplog.at_level("INFO", logger="airflow_provider_eh.publishing.sender"):
        result = setup.publisher(lease_only_batch_bytes=SMALL).publish(events, batch_id=batch("hub-bound"))["0"]
    assert (result.fencing, result.lease_only_batch_bytes) == ("hub", None)
    assert _sdk_batches(caplog) == 2  # the bound (16 KiB) does not apply
    assert setup.publisher().publish(events, batch_id=batch("hub-bound"))["0"].lease_only_batch_bytes is None


def test_the_bound_caps_each_sdk_batch_of_a_lease_only_send(setup: PublishSetup,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    events = events_for("lease-cap", 400, partitions=1, size=SIZE)  # ~170 KB
    with caplog.at_level("INFO", logger="airflow_provider_eh.publishing.sender"):
        result = setup.publisher(hub_fencing=False, lease_only_batch_bytes=SMALL).publish(
            events, batch_id=batch("lease-cap"))["0"]
    assert (result.fencing, result.lease_only_batch_bytes) == ("lease", SMALL)
    assert _sdk_batches(caplog) >= 170_000 // SMALL  # without the cap: one batch
