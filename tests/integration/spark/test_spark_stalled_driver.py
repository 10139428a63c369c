"""A Spark driver that stalls, or is cut off from blob storage, in the middle of its executors' send,
while another run takes over.

The first run is a real Spark publish in its own process (``local[2]``: a JVM and Python workers of
its own). Its executors send slowly (the endpoint acknowledges each SDK batch after 3 s, as a busy
namespace would) to an endpoint without idempotent producers, so that the hub fences nothing and the
driver's claim is the only fence. Once its first SDK batch is in the hub, the driver's Python process
(the task, which holds the claims) is stopped with SIGSTOP; its JVM and its executors run on. Its
lease runs out, a second run claims, recovers by read-back and commits (its own sends at full speed:
the delay is lifted once its intent is written, after its read-back, and whatever the first run's
executors sent from then on would land twice all the same); then the driver is resumed.
The executors asked the driver's hold relay before each SDK batch and got no answer from the stopped
driver: they stopped by the claim's deadline, before the lease could expire, so the hub holds every
row once. Cut off from blob storage instead (a TCP proxy freezes the driver's blob traffic; the hub
stays reachable), the driver's renewals hang until their bound, its deadline passes and its relay
answers that the claim is lost: the executors stop just the same. Without the executors' check
(the executors ignoring their tickets) the paused run landed 7,568 of the 12,000 rows twice.

The last test is the other fence alone: the hub's. The same pause on an endpoint with idempotent
producers and the executors' check off (``hold_relay=False``), the first run's traffic to the hub
throttled (over WebSockets, through a TCP proxy) instead of its acknowledgements delayed: the
takeover's owner level makes the hub refuse the paused run's executors. With the first run's
executors on plain links instead (``hub_fencing=False`` in its runner), 9,340 of the 12,000 rows
landed twice.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_kit import SparkSetup, batch, write_orders

from airflow_provider_eh import steps
from eventhubs_local import EmulatorProcess
from tests.support.proxy import FaultProxy
from tests.conftest import unique_name
from tests.support.paused import wait_stopped

ROWS = 12_000
PAD = 1000  # ~1.1 KB events: about 900 to an SDK batch, 13 SDK batches, ~40 s at the ack delay
ACK_DELAY_MS = 3000
# SDK batches of the link's size on the lease-only endpoint too (the default lease_only_batch_bytes would make
# four times as many, each waiting out the ack delay): what is timed above, and what the claim's deadline fences
WHOLE_BATCHES = {"lease_only_batch_bytes": 1024 * 1024}
THROTTLE_BYTES_PER_S = 150_000  # ~13 MB of output: about 90 s for the first run's executors


def _clear_faults_after_intent(admin: Any) -> steps.StepObserver:
    """A step observer (this process's publish) clearing the endpoint's faults at its ``after_intent``."""
    def observer(step: str, count: int, detail: Any) -> None:
        if step == "after_intent":
            admin.clear_faults()
    return observer


def _wait_for_the_first_batch(setup: SparkSetup, first: Any) -> None:
    """Until the first run's first SDK batch is in the hub (it must still be running)."""
    deadline = time.monotonic() + 240
    while not setup.read_back():
        assert first.poll() is None, first.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the first SDK batch never landed"
        time.sleep(0.5)


@pytest.mark.parametrize("stall", ["paused", "cut_off_from_blob_storage"])
def test_executors_of_a_stalled_driver_stop_by_its_deadline_and_each_row_lands_once(spark: Any, setup: SparkSetup,
                                                                                    tmp_path: Path, stall: str) -> None:
    path = write_orders(spark, str(tmp_path / "orders"), ROWS, pad=PAD)
    batch_id = batch(f"stalled-driver-{stall}")
    port = setup.azurite.port
    with EmulatorProcess(tmp_path / "no-fencing", extra_args=["--no-idempotent-producers"]) as plain, \
            FaultProxy("127.0.0.1", port) as proxy:
        hub = unique_name("plain")
        plain.admin.create_hub(hub, partitions=1)
        on_plain = SparkSetup(plain, setup.azurite, hub, setup.container_name, tmp_path)
        plain.admin.set_fault("delay_ack", hub=hub, ms=ACK_DELAY_MS)
        first = on_plain.start(path, batch_id, blob=setup.azurite.connection_string.replace(f":{port}/", f":{proxy.port}/"),
                               publisher=WHOLE_BATCHES)
        # the second run (this process's) sends at full speed: its intent is written after its claim and
        # read-back, so what the first run's executors would send from then on lands twice, delayed or not
        stop_observing = steps.observe(_clear_faults_after_intent(plain.admin))
        try:
            _wait_for_the_first_batch(on_plain, first)
            if stall == "paused":
                first.send_signal(signal.SIGSTOP)  # the driver only: its JVM and executors go on
                wait_stopped(first.pid)
            else:
                proxy.freeze()  # its blob traffic: held from now on, connections open
            stopped_at = len(on_plain.read_back())
            results = on_plain.publish(spark, path, batch_id, claim_timeout=90, publisher=WHOLE_BATCHES)
            assert results["0"].status == "recovered" and results["0"].fencing == "lease"
            assert results["0"].landed_count >= stopped_at
        finally:
            stop_observing()
            first.send_signal(signal.SIGCONT)
            proxy.thaw()
        out, err = first.communicate(timeout=240)
        plain.admin.clear_faults()
        read = on_plain.read_back()
    assert first.returncode != 0, f"the stalled run must not finish: {out[-2000:]}"
    ids = Counter(json.loads(e.body)["id"] for e in read)
    assert len(ids) == ROWS and set(ids.values()) == {1}, \
        f"{len(read)} events, {len(ids)} distinct, {sum(n - 1 for n in ids.values())} twice"
    said = out + err  # the executors' reason: in the run's error (stdout) and the driver's log (stderr)
    assert "the driver's hold could not be confirmed" in said or "the driver no longer holds" in said, said[-4000:]


def test_executors_of_a_paused_driver_are_fenced_by_the_hub_without_the_relay(spark: Any, setup: SparkSetup,
                                                                              tmp_path: Path) -> None:
    """The hub's own fencing on the Spark path: the executors' links are idempotent producers.

    With the executors' check of the driver's claim turned off (``hold_relay=False``), nothing on the
    first run's side stops its executors while its driver is paused: they send on. The second run's
    claim raises the owner level and its sender attaches with it, so the hub refuses the first run's
    executors at their next SDK batch; what they had sent before carries the ledger's producer sequence
    numbers, which the second run's resend repeats and the hub drops. Each row lands once.
    """
    path = write_orders(spark, str(tmp_path / "orders"), ROWS, pad=PAD)
    batch_id = batch("stalled-driver-fenced")
    hub = unique_name("fenced")
    setup.event_hubs.admin.create_hub(hub, partitions=1)  # one partition: the SDK batches go out one by one
    fenced = SparkSetup(setup.event_hubs, setup.azurite, hub, setup.container_name, tmp_path)
    # the first run's traffic to the hub alone is slow (a throughput unit shared by many publishers): its
    # executors would need over a minute for the whole output, so they are still sending at the takeover.
    # It reaches the hub over WebSockets at the throttling proxy's address: the same namespace, so the
    # same ledger as the second run's.
    with FaultProxy("127.0.0.1", setup.event_hubs.websocket_port) as slow:
        slow.throttle(THROTTLE_BYTES_PER_S)
        first = fenced.start(path, batch_id, hold_relay=False, network={
            "transport": "websocket", "custom_endpoint_address": f"sb://127.0.0.1:{slow.port}"})
        try:
            _wait_for_the_first_batch(fenced, first)
            first.send_signal(signal.SIGSTOP)  # the driver only: its JVM and executors send on
            wait_stopped(first.pid)
            results = fenced.publish(spark, path, batch_id, claim_timeout=90)
            assert results["0"].status == "recovered" and results["0"].fencing == "hub"
            assert results["0"].landed_count < ROWS, "the first run's executors must not have sent everything"
        finally:
            first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=240)
    read = fenced.read_back()
    assert first.returncode != 0, f"the stalled run must not finish: {out[-2000:]}"
    ids = Counter(json.loads(e.body)["id"] for e in read)
    assert len(ids) == ROWS and set(ids.values()) == {1}, \
        f"{len(read)} events, {len(ids)} distinct, {sum(n - 1 for n in ids.values())} twice"
    said = out + err
    assert "fenced at the hub" in said, said[-4000:]  # its executors were refused by the hub, not stopped by a relay
    assert "hold could not be confirmed" not in said and "the driver no longer holds" not in said
