"""Exactly-once publishing vs. the plain SDK, and recovery vs. a plain read, in one run.

Starts its own local Event Hubs endpoint and Azurite, then measures over the same ``--events``
events of ``--size`` bytes spread over 4 partitions:

- ``sdk``: ``EventHubProducerClient.send_batch`` per partition (one client and thread per partition,
  as the engine uses), filling SDK batches to the link's limit: the floor any producer pays;
- ``engine``: :meth:`IdempotentPublisher.publish` with the blob state store on Azurite: validation,
  fingerprints, claim, intent, stamped send on idempotent-producer links (the hub's fencing), commit;
  and ``unfenced``: the same with ``hub_fencing=False`` (plain sender links, the claim's deadline alone);
- ``recovery``: the engine's retry of a batch whose every event landed but whose commit never
  happened (read-back of the whole in-doubt batch, nothing resent) vs. ``read``: a plain read of the
  same hub's events with the SDK consumer;
- over WebSockets (the endpoint's ``/$servicebus/websocket`` listener, the connection's
  ``transport=websocket``): ``sdk`` and ``engine`` again, ``ws_ratio`` being the engine's over the
  plain SDK's, both over WebSockets, and ``ws_cost`` the engine's time over WebSockets over its time
  over TCP (what the WebSocket framing costs).

The last line is ``ratio=<engine/sdk eps> engine_eps=... sdk_eps=... recovery_ratio=<recovery/read time>
unfenced_ratio=<unfenced/sdk eps> ws_ratio=<engine/sdk eps over WebSockets> ws_cost=<engine time ws/tcp>``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.storage.blob import BlobServiceClient  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.fencing import HubFencing  # noqa: E402
from airflow_provider_eh.client.network import NetworkOptions  # noqa: E402
from airflow_provider_eh.client.readback import read_hub  # noqa: E402
from airflow_provider_eh.publishing import (  # noqa: E402
    BlobProducerStateStore,
    Fingerprint,
    IdempotentPublisher,
    normalise,
    send_partition,
)
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402
from tests.support.events import send_filled  # noqa: E402

PARTITIONS = 4


def make_events(n: int, size: int) -> list[dict]:
    """``n`` events of ``size`` bytes, spread over the partitions in turn."""
    pad = "x" * max(0, size - 20)
    return [{"body": f"{i:019d}{pad}".encode()[:size], "partition_id": str(i % PARTITIONS)} for i in range(n)]


def plain_sdk(endpoint: EventHubsEndpoint, events: list[dict]) -> float:
    """Seconds the plain SDK takes to send ``events``, each partition from its own thread (the baseline)."""
    per_partition = {str(p): [e["body"] for e in events if e["partition_id"] == str(p)] for p in range(PARTITIONS)}

    def send(pid: str) -> None:
        with endpoint.plain_producer() as producer:
            send_filled(producer, pid, per_partition[pid])

    started = time.perf_counter()
    threads = [threading.Thread(target=send, args=(str(p),)) for p in range(PARTITIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def engine(endpoint: EventHubsEndpoint, container, events: list[dict], batch_id: str, hub_fencing: HubFencing = "auto") -> float:
    """Seconds the engine takes to publish ``events`` as one new batch (fencing by the hub or by the lease)."""
    publisher = IdempotentPublisher(endpoint, BlobProducerStateStore(container), producer_group="bench",
                                    hub_fencing=hub_fencing)
    started = time.perf_counter()
    results = publisher.publish(events, batch_id=batch_id)
    elapsed = time.perf_counter() - started
    assert sum(r.events for r in results.values()) == len(events)
    assert {r.fencing for r in results.values()} == {"hub" if hub_fencing else "lease"}
    return elapsed


def in_doubt(endpoint: EventHubsEndpoint, container, events: list[dict], batch_id: str) -> None:
    """Send the whole batch under an intent and never commit: what a crash after the send leaves."""
    publisher = IdempotentPublisher(endpoint, BlobProducerStateStore(container), producer_group="bench")
    grouped = publisher.prepare(events)
    for pid, outgoing in grouped.items():
        fp = Fingerprint()
        for e in outgoing:
            fp.update(e.body, e.properties)
        session = publisher.begin(pid, batch_id, fp.count, fp.hexdigest())
        send_partition(endpoint, session.plan, outgoing)
        publisher.abort(session)


def recovery(endpoint: EventHubsEndpoint, container, events: list[dict], batch_id: str) -> float:
    """Seconds the engine takes to recover a batch left in doubt by :func:`in_doubt`, sending nothing again."""
    publisher = IdempotentPublisher(endpoint, BlobProducerStateStore(container, claim_timeout=30), producer_group="bench")
    started = time.perf_counter()
    results = publisher.publish(events, batch_id=batch_id)
    elapsed = time.perf_counter() - started
    assert {r.status for r in results.values()} == {"recovered"} and sum(r.resent for r in results.values()) == 0
    return elapsed


def main() -> None:
    """Print the engine's throughput against the plain SDK's (hub fencing on and off, over WebSockets too)
    and the time of a recovery."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=200)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    events = make_events(args.events, args.size)
    assert all(normalise(e, i, [str(p) for p in range(PARTITIONS)]) for i, e in enumerate(events[:10]))
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp, \
            EmulatorProcess(Path(tmp) / "eh") as eh, AzuriteProcess(Path(tmp) / "azurite") as azurite:
        container = BlobServiceClient.from_connection_string(azurite.connection_string).create_container("publish-state")
        hubs = {name: EventHubsEndpoint.from_connection_string(eh.connection_string(name), name)
                for name in ("bench-sdk", "bench-engine", "bench-unfenced", "bench-recovery")}
        websocket = NetworkOptions.from_fields({"transport": "websocket", "custom_endpoint_address": eh.websocket_address})
        hubs.update({name: EventHubsEndpoint.from_connection_string(eh.connection_string(name), name, network=websocket)
                     for name in ("bench-ws-sdk", "bench-ws-engine")})
        for name in hubs:
            eh.admin.create_hub(name, partitions=PARTITIONS)
        sdk_s = plain_sdk(hubs["bench-sdk"], events)
        engine_s = engine(hubs["bench-engine"], container, events, "e" * 64)
        unfenced_s = engine(hubs["bench-unfenced"], container, events, "u" * 64, hub_fencing=False)
        in_doubt(hubs["bench-recovery"], container, events, "r" * 64)
        read_started = time.perf_counter()
        read = read_hub(hubs["bench-recovery"], shared=False)
        read_s = time.perf_counter() - read_started
        assert len(read) == len(events)
        recovery_s = recovery(hubs["bench-recovery"], container, events, "r" * 64)
        ws_sdk_s = plain_sdk(hubs["bench-ws-sdk"], events)
        ws_engine_s = engine(hubs["bench-ws-engine"], container, events, "w" * 64)
        assert eh.admin.stats()["websocket_connections_total"] > 0
    sdk_eps, engine_eps = len(events) / sdk_s, len(events) / engine_s
    print(f"plain SDK send_batch: {len(events)} events in {sdk_s:.2f}s = {sdk_eps:.0f} events/s")
    print(f"engine publish:       {len(events)} events in {engine_s:.2f}s = {engine_eps:.0f} events/s")
    print(f"engine, hub fencing off: {len(events)} events in {unfenced_s:.2f}s = {len(events) / unfenced_s:.0f} events/s")
    print(f"plain read:           {len(events)} events in {read_s:.2f}s")
    print(f"recovery (read-back): {len(events)} events in {recovery_s:.2f}s")
    print(f"over WebSockets: plain SDK {ws_sdk_s:.2f}s, engine {ws_engine_s:.2f}s")
    print(f"ratio={engine_eps / sdk_eps:.3f} engine_eps={engine_eps:.0f} sdk_eps={sdk_eps:.0f} "
          f"recovery_ratio={recovery_s / read_s:.3f} unfenced_ratio={len(events) / unfenced_s / sdk_eps:.3f} "
          f"ws_ratio={ws_sdk_s / ws_engine_s:.3f} ws_cost={ws_engine_s / engine_s:.3f}")


if __name__ == "__main__":
    main()
