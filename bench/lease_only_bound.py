"""The lease-only bound: duplicates at the hub after a stall mid-send, and the publish rate, per bound.

On a local Event Hubs endpoint started without idempotent-producer links (``--no-idempotent-producers``,
a namespace without the feature), so that every send is fenced by the claim's lease alone, for each
``lease_only_batch_bytes`` of ``--bounds`` (the default one and one smaller, one larger):

- ``stall``: a publisher in its own process publishes ``--stall-events`` events of ``--stall-size``
  bytes to one partition and stops itself with SIGSTOP after its deadline check of its second SDK
  batch and before that batch goes out (at the step ``before_send:2``: the one moment the claim's
  deadline cannot cover); a second publisher of the same batch waits for the stopped one's lease
  to run out, takes over, recovers by read-back and commits; then the first is continued with
  SIGCONT. The hub is read back and its duplicates counted: events, and their body bytes. The
  stalled publishers of all bounds run side by side (each on its own hub), so the lease's wait is
  paid once;
- ``rate``: the engine publishes ``--events`` events of ``--size`` bytes over 4 partitions (blob state
  store on Azurite, lease-only fencing, this bound), against the plain SDK (``EventHubProducerClient``,
  one client and thread per partition, batches filled to the link's limit) sending the same events,
  in ``--rounds`` interleaved rounds on fresh hubs; the medians. ``--ack-delay-ms`` has the endpoint
  hold each acknowledgement that long (its ``delay_ack`` fault, on both sides' hubs), as a hub far
  from the publisher would: every SDK batch costs a round trip, so the rate of smaller batches falls
  with the latency.

The last line is, per bound ``B``: ``dup_events_B=... dup_bytes_B=... ratio_B=<engine/sdk eps>``, and
``sdk_eps=...``. ``dup_bytes_B`` is at most ``B`` (the bound counts encoded bytes, which are more than the body's).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.storage.blob import BlobServiceClient, ContainerClient  # noqa: E402
from publish_overhead import PARTITIONS, plain_sdk  # noqa: E402  (the same plain SDK side as the publish benchmark)

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.readback import read_hub  # noqa: E402
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher  # noqa: E402
from airflow_provider_eh.publishing.in_flight import DEFAULT_LEASE_ONLY_BATCH_BYTES  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402
from tests.support.paused import wait_stopped  # noqa: E402

STALL_BATCH = 2
STALL_AT = f"before_send:{STALL_BATCH}"


def make_events(n: int, size: int, partitions: int, prefix: str = "") -> list[dict[str, Any]]:
    """``n`` events of ``size`` body bytes (a unique id first), spread over the partitions in turn."""
    pad = "x" * size
    return [{"body": f"{prefix}{i:012d}{pad}".encode()[:size], "partition_id": str(i % partitions)} for i in range(n)]


def publisher(eh: str, hub: str, blob: str, container: str, bound: int, claim_timeout: float = 0) -> IdempotentPublisher:
    """The engine on ``hub`` with the blob state store, fenced by the lease alone (the endpoint offers nothing else)."""
    store = BlobProducerStateStore(ContainerClient.from_connection_string(blob, container), claim_timeout=claim_timeout)
    return IdempotentPublisher(EventHubsEndpoint.from_connection_string(eh, hub), store, producer_group="bench",
                               lease_only_batch_bytes=bound)


def stop_before_send(batch: int) -> None:
    """SIGSTOP this process when the sender reaches ``before_send:batch``, directed at the sending thread.

    ``airflow_provider_eh.testing.crash.pause_at`` sends SIGSTOP to the process; the kernel may hand it
    to another thread, and the sending thread can go on into ``send_batch`` (its batch then lands
    before the stop) until that thread stops them all. Directed at the sending thread, the stop holds
    it at the step itself.
    """
    from airflow_provider_eh.steps import observe

    def observer(step: str, count: int, _detail: Any) -> None:
        if step == "before_send" and count == batch:
            disarm()
            signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)

    disarm = observe(observer)


def child(config_path: str) -> None:
    """The publisher that stalls: armed to stop itself at :data:`STALL_AT`, then publishes (run as ``--child``)."""
    config = json.loads(Path(config_path).read_text())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)
    stop_before_send(STALL_BATCH)
    events = make_events(config["events"], config["size"], 1)
    results = publisher(config["eh"], config["hub"], config["blob"], config["container"], config["bound"]).publish(
        events, batch_id=config["batch_id"])
    print(json.dumps({p: r.to_dict() for p, r in results.items()}), flush=True)


def stalls(eh: Any, azurite: Any, container: str, bounds: list[int], n: int, size: int, tmp: Path) -> dict[int, dict[str, Any]]:
    """Per bound: a stall before SDK batch 2, a takeover, the resume; the duplicates read back from its hub."""
    runs: dict[int, dict[str, Any]] = {}
    for bound in bounds:
        hub = f"stall-{bound}"
        eh.admin.create_hub(hub, partitions=1)
        config = {"eh": eh.connection_string(hub), "hub": hub, "blob": azurite.connection_string, "container": container,
                  "bound": bound, "events": n, "size": size, "batch_id": f"{bound:064d}"}
        path = tmp / f"stall-{bound}.json"
        path.write_text(json.dumps(config))
        proc = subprocess.Popen([sys.executable, __file__, "--child", str(path)], text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        runs[bound] = {"config": config, "proc": proc}
    for run in runs.values():
        wait_stopped(run["proc"].pid)

    def take_over(bound: int) -> Any:
        c = runs[bound]["config"]
        events = make_events(n, size, 1)
        return publisher(c["eh"], c["hub"], c["blob"], c["container"], bound, claim_timeout=90).publish(
            events, batch_id=c["batch_id"])["0"]

    try:
        with ThreadPoolExecutor(max_workers=len(bounds)) as pool:
            taken = dict(zip(bounds, pool.map(take_over, bounds), strict=True))
    finally:
        for run in runs.values():
            run["proc"].send_signal(signal.SIGCONT)
    out: dict[int, dict[str, Any]] = {}
    for bound, run in runs.items():
        _stdout, err = run["proc"].communicate(timeout=180)
        read = read_hub(EventHubsEndpoint.from_connection_string(run["config"]["eh"], run["config"]["hub"]))
        copies = Counter(bytes(e.body) for e in read)
        assert len(copies) == n, f"bound {bound}: {len(copies)} distinct events of {n} read back"
        dup_events = sum(c - 1 for c in copies.values())
        dup_bytes = sum((c - 1) * len(body) for body, c in copies.items())
        result = taken[bound]
        assert result.status == "recovered" and result.fencing == "lease", result
        out[bound] = {"dup_events": dup_events, "dup_bytes": dup_bytes, "in_force": result.lease_only_batch_bytes,
                      "resent": result.resent, "stalled_exit": run["proc"].returncode,
                      "stopped_by": "deadline" if "deadline passed" in err else ("error" if "Traceback" in err else "?")}
    return out


def engine(eh: Any, azurite: Any, container: str, hub: str, events: list[dict[str, Any]], bound: int) -> float:
    """Seconds the engine takes to publish ``events`` as one new batch, fenced by the lease, with ``bound``."""
    pub = publisher(eh.connection_string(hub), hub, azurite.connection_string, container, bound)
    started = time.perf_counter()
    results = pub.publish(events, batch_id="e" * 64)
    elapsed = time.perf_counter() - started
    assert sum(r.events for r in results.values()) == len(events)
    assert {(r.fencing, r.lease_only_batch_bytes) for r in results.values()} == {("lease", bound)}
    return elapsed


def main() -> None:
    """Print, per bound, the duplicates after a stall and the publish rate against the plain SDK's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bounds", default=f"65536,{DEFAULT_LEASE_ONLY_BATCH_BYTES},1048576",
                        help="lease_only_batch_bytes values, comma-separated (default: one smaller, the default, 1 MiB)")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stall-events", type=int, default=8000)
    parser.add_argument("--stall-size", type=int, default=480)
    parser.add_argument("--ack-delay-ms", type=int, default=0, help="each acknowledgement's delay in the rate part")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    logging.basicConfig(level=logging.WARNING)
    bounds = [int(b) for b in args.bounds.split(",")]
    events = make_events(args.events, args.size, PARTITIONS)
    sdk_s: list[float] = []
    engine_s: dict[int, list[float]] = {b: [] for b in bounds}
    with tempfile.TemporaryDirectory(prefix="bench-lease-bound-") as tmp, \
            EmulatorProcess(Path(tmp) / "eh", extra_args=["--no-idempotent-producers"]) as eh, \
            AzuriteProcess(Path(tmp) / "azurite") as azurite:
        container = "lease-bound"
        BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
        started = time.perf_counter()
        stalled = stalls(eh, azurite, container, bounds, args.stall_events, args.stall_size, Path(tmp))
        stall_s = time.perf_counter() - started
        for r in range(args.rounds):
            hub = f"sdk-{r}"
            eh.admin.create_hub(hub, partitions=PARTITIONS)
            if args.ack_delay_ms:
                eh.admin.set_fault("delay_ack", hub=hub, ms=args.ack_delay_ms)
            sdk_s.append(plain_sdk(EventHubsEndpoint.from_connection_string(eh.connection_string(hub), hub), events))
            for bound in bounds:
                hub = f"engine-{bound}-{r}"
                eh.admin.create_hub(hub, partitions=PARTITIONS)
                if args.ack_delay_ms:
                    eh.admin.set_fault("delay_ack", hub=hub, ms=args.ack_delay_ms)
                engine_s[bound].append(engine(eh, azurite, container, hub, events, bound))
    sdk_eps = len(events) / statistics.median(sdk_s)
    print(f"stalls ({args.stall_events} events of {args.stall_size} bytes on one partition, SIGSTOP at {STALL_AT}, "
          f"takeover, SIGCONT): {stall_s:.1f}s")
    print(f"plain SDK: {len(events)} events of {args.size} bytes, ack delay {args.ack_delay_ms} ms, "
          f"median {statistics.median(sdk_s):.2f}s = {sdk_eps:.0f} events/s")
    figures = []
    for bound in bounds:
        s, eps = stalled[bound], len(events) / statistics.median(engine_s[bound])
        print(f"lease_only_batch_bytes={bound}: after the stall {s['dup_events']} events ({s['dup_bytes']} body bytes) "
              f"twice at the hub (bound in force {s['in_force']}; the stalled one stopped by {s['stopped_by']}, "
              f"exit {s['stalled_exit']}); publish median {statistics.median(engine_s[bound]):.2f}s = {eps:.0f} events/s, "
              f"{eps / sdk_eps:.3f} of the plain SDK (rounds: {', '.join(f'{t:.2f}' for t in engine_s[bound])}s)")
        assert s["dup_bytes"] <= bound, f"bound {bound}: {s['dup_bytes']} duplicate bytes"
        figures.append(f"dup_events_{bound}={s['dup_events']} dup_bytes_{bound}={s['dup_bytes']} "
                       f"ratio_{bound}={eps / sdk_eps:.3f}")
    print(" ".join(figures) + f" sdk_eps={sdk_eps:.0f} ack_delay_ms={args.ack_delay_ms}")


if __name__ == "__main__":
    main()
