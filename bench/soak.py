"""Soak: publish and ingest interval after interval; do the endpoint's and the worker's memory and open
file descriptors stay flat?

``python bench/soak.py --intervals 50``

Starts its own local Event Hubs endpoint and Azurite. This process is the worker: for each interval it
publishes the interval's events exactly once (:class:`~airflow_provider_eh.publishing.IdempotentPublisher`,
blob state on Azurite, the batch id derived from the interval as the operator derives it), re-runs the
same interval (a no-op by the ledger), then ingests what is new into SQLite
(:class:`~airflow_provider_eh.ingest.IngestRun`, blob checkpoints), and checks the table holds every
event once. The engine and ingest APIs are driven directly, not through the scheduler, so the figures
are the provider's own, not the scheduler's. After each interval it samples RSS and open descriptors of
itself and of the endpoint process (psutil). Growth is measured from the end of the warm-up
(``--warmup`` intervals) to the mean of the last five samples.

Last line: ``intervals=… endpoint_rss_growth_pct=… worker_rss_growth_pct=… endpoint_fd_growth=… worker_fd_growth=…``.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from azure.storage.blob import BlobServiceClient  # noqa: E402

from _sampling import growth, measure  # noqa: E402  (bench/, this script's folder)
from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream  # noqa: E402
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, derive_batch_id  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402

PARTITIONS = 4
START = datetime(2026, 1, 1, tzinfo=UTC)


def interval_events(day: datetime, n: int) -> list[dict]:
    """The events of the interval starting at ``day``: ``n`` orders keyed over 211 customers."""
    stamp = day.date().isoformat()
    return [{"body": {"id": f"{stamp}-{i}", "amount": i % 97, "note": "x" * 150}, "partition_key": f"customer-{i % 211}"}
            for i in range(n)]


def main() -> int:
    """Publish and ingest interval after interval and report the growth of memory and descriptors."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--intervals", type=int, default=50)
    parser.add_argument("--events", type=int, default=2000, help="events per interval")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    if args.intervals < args.warmup + 5:
        parser.error("--intervals must be at least --warmup + 5")
    logging.basicConfig(level=logging.WARNING)
    worker = psutil.Process()
    samples: list[tuple[float, int, float, int]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        root = Path(tmp)
        with EmulatorProcess(root / "eh", hubs={"soak": PARTITIONS}, extra_args=["--log-level", "WARNING"]) as eh, \
                AzuriteProcess(root / "azurite") as azurite:
            endpoint_proc = psutil.Process(eh.pid)
            endpoint = EventHubsEndpoint.from_connection_string(eh.connection_string("soak"))
            blobs = BlobServiceClient.from_connection_string(azurite.connection_string)
            state = blobs.create_container("soak-state")
            checkpoints = blobs.create_container("soak-checkpoints")
            db = root / "sink.db"
            with sqlite3.connect(db) as conn:
                conn.execute("CREATE TABLE orders (id TEXT NOT NULL, amount INTEGER, note TEXT)")
                conn.execute("PRAGMA journal_mode = WAL")
            stream = Stream(endpoint.namespace, endpoint.eventhub_name, "$Default")
            for k in range(args.intervals):
                day = START + timedelta(days=k)
                events = interval_events(day, args.events)
                batch_id = derive_batch_id("soak.publish", "soak", "publish", interval_start=day,
                                           interval_end=day + timedelta(days=1))
                for expected in ("published", "already_committed"):  # the run, then a re-run of the interval
                    publisher = IdempotentPublisher(endpoint, BlobProducerStateStore(state), producer_group="soak.publish")
                    results = publisher.publish(events, batch_id=batch_id)
                    if {r.status for r in results.values()} != {expected}:
                        raise SystemExit(f"interval {k}: {expected} expected, got {results}")
                store = SqlIngestStore(sqlite3.connect(db), stream)
                summary = IngestRun(
                    endpoint, "$Default", store, BatchProcessor("orders"), owner_id="soak-worker",
                    container_client=checkpoints, limits=RunLimits(batch_size=500, max_wait_time=0.5, strategy="greedy"),
                ).run()
                store.close()
                with sqlite3.connect(db) as conn:
                    rows, distinct = conn.execute("SELECT count(*), count(DISTINCT id) FROM orders").fetchone()
                if summary["events"] != args.events or rows != distinct or rows != (k + 1) * args.events:
                    raise SystemExit(f"interval {k}: ingested {summary['events']}, table {rows} rows ({distinct} distinct)")
                gc.collect()
                rss, fds = measure(worker)
                eh_rss, eh_fds = measure(endpoint_proc)
                samples.append((rss, fds, eh_rss, eh_fds))
                if k % 5 == 4 or k == args.intervals - 1:
                    print(f"  interval {k + 1}: worker {rss:.0f} MiB {fds} fds, endpoint {eh_rss:.0f} MiB {eh_fds} fds "
                          f"({time.monotonic() - started:.0f}s)", flush=True)
    w = args.warmup
    worker_rss, worker_fds, eh_rss, eh_fds = (list(col) for col in zip(*samples, strict=True))
    figures = {
        "intervals": args.intervals,
        "endpoint_rss_growth_pct": round(growth(eh_rss, w), 1),
        "worker_rss_growth_pct": round(growth(worker_rss, w), 1),
        "endpoint_fd_growth": eh_fds[-1] - eh_fds[w - 1],
        "worker_fd_growth": worker_fds[-1] - worker_fds[w - 1],
    }
    print(f"{args.intervals} intervals of {args.events} events (each published, re-run and ingested) in "
          f"{time.monotonic() - started:.0f}s; after {w} warm-up intervals: worker {worker_rss[w - 1]:.0f} -> "
          f"{worker_rss[-1]:.0f} MiB, {worker_fds[w - 1]} -> {worker_fds[-1]} fds; endpoint {eh_rss[w - 1]:.0f} -> "
          f"{eh_rss[-1]:.0f} MiB, {eh_fds[w - 1]} -> {eh_fds[-1]} fds")
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
