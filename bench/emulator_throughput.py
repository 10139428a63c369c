"""Throughput of the local Event Hubs endpoint through the real (sync) azure-eventhub SDK.

Starts a fresh emulator subprocess, sends ``--events`` events of ``--size`` bytes in SDK batches to
one partition, receives them back, and reports events/s and CPU microseconds per event for the
server process (from /proc via psutil) and for this client process (the SDK's own cost), so the
ratio shows which side is the bottleneck. The last line is machine-readable ``key=value`` pairs.

Measured on the 2-core development machine (100,000 events, fsync=batch):
send_eps=19925 receive_eps=23598 server_us_per_event=9.7 client_us_per_event=66.9
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient  # noqa: E402

from eventhubs_local import EmulatorProcess  # noqa: E402


def cpu_seconds(proc: psutil.Process) -> float:
    """User and system CPU seconds ``proc`` has used."""
    times = proc.cpu_times()
    return times.user + times.system


def main() -> int:
    """Send and receive ``--events`` through the endpoint and print events per second and CPU per event."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--fsync", default="batch", choices=["always", "batch", "never"])
    args = parser.parse_args()
    n, body = args.events, b"x" * args.size
    me = psutil.Process()
    with tempfile.TemporaryDirectory(prefix="eh-bench-") as tmp:
        with EmulatorProcess(tmp, hubs={"bench": 1}, extra_args=["--fsync", args.fsync, "--log-level", "WARNING"]) as em:
            server = psutil.Process(em.pid)
            conn = em.connection_string("bench")

            producer = EventHubProducerClient.from_connection_string(conn)
            with producer:
                producer.get_eventhub_properties()  # connect outside the measurement
                s0, c0, t0 = cpu_seconds(server), cpu_seconds(me), time.perf_counter()
                sent = 0
                batch = producer.create_batch(partition_id="0")
                while sent < n:
                    try:
                        batch.add(EventData(body))
                        sent += 1
                    except ValueError:
                        producer.send_batch(batch)
                        batch = producer.create_batch(partition_id="0")
                if len(batch):
                    producer.send_batch(batch)
                send_s = time.perf_counter() - t0
                send_server, send_client = cpu_seconds(server) - s0, cpu_seconds(me) - c0

            consumer = EventHubConsumerClient.from_connection_string(conn, consumer_group="$Default")
            received = 0
            done = threading.Event()

            def on_batch(_ctx: object, events: list[EventData]) -> None:
                nonlocal received
                received += len(events)
                if received >= n:
                    done.set()

            s0, c0, t0 = cpu_seconds(server), cpu_seconds(me), time.perf_counter()
            worker = threading.Thread(target=consumer.receive_batch, kwargs=dict(
                on_event_batch=on_batch, partition_id="0", starting_position="-1", max_batch_size=300,
                prefetch=300), daemon=True)
            worker.start()
            done.wait(600)
            recv_s = time.perf_counter() - t0
            recv_server, recv_client = cpu_seconds(server) - s0, cpu_seconds(me) - c0
            consumer.close()
            worker.join(30)
            if received < n:
                print(f"only {received} of {n} events received", file=sys.stderr)
                return 1

    us = lambda seconds: seconds * 1e6 / n  # noqa: E731
    print(f"send:    {n / send_s:10.0f} events/s  server {us(send_server):6.1f} us/event  client {us(send_client):6.1f} us/event")
    print(f"receive: {n / recv_s:10.0f} events/s  server {us(recv_server):6.1f} us/event  client {us(recv_client):6.1f} us/event")
    print(f"send_eps={n / send_s:.0f} receive_eps={n / recv_s:.0f} "
          f"server_us_per_event={us(send_server + recv_server):.1f} client_us_per_event={us(send_client + recv_client):.1f} "
          f"send_server_us={us(send_server):.1f} send_client_us={us(send_client):.1f} "
          f"receive_server_us={us(recv_server):.1f} receive_client_us={us(recv_client):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
