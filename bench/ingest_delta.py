"""Ingestion into a Delta table, on local disk and in Azurite, vs. the SDK's plain receive loop: the batching study.

``bench/ingest.py`` measures the Delta sinks beside the SQL ones with the defaults; this script varies
``--batch-seconds`` (``batch_seconds`` on a Delta sink) to show what gathering does to commits and files.

Starts its own local Event Hubs endpoint and Azurite, publishes ``--events`` (100,000) stamped JSON events
over the hub's partitions, then ``--rounds`` (3) times in turn:

- ``plain``: ``EventHubConsumerClient.receive_batch`` over every partition (batches of 500), counting events;
- ``delta-local`` / ``delta-azurite``: one :class:`~airflow_provider_eh.ingest.IngestRun` into a Delta table of
  its own with what ``EventHubIngestOperator(sink="delta")`` passes when not told otherwise (``batch_bytes``
  64 MiB, ``batch_seconds`` 10, dedupe on, ownership and blob checkpoints on Azurite), through a consumer
  group of its own.

Each round's ratio is the plain loop's time over the ingestion's. After each run the table's log is read back:
its commits and data files, scaled to 100,000 events. The last line: ``ratio_delta_local=...
ratio_delta_azurite=... commits_per_100k_local=... files_per_100k_local=... commits_per_100k_azurite=...
files_per_100k_azurite=... plain_eps=...``. Azurite must be 3.37 or later (``AZURITE_BIN``): delta-rs lists the
log with ``startFrom``.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from azure.storage.blob import BlobServiceClient  # noqa: E402
from ingest import DELTA_BATCH_SECONDS, MISMATCHES, azurite_options, ingest_delta, plain_receive, publish, warm_delta  # noqa: E402

from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402


def main() -> int:
    """Compare ingestion into a Delta table with a plain receive of the same events; print ratios, commits, files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-seconds", type=float, default=DELTA_BATCH_SECONDS,
                        help="batch_seconds (0: a commit per receive, as a SQL sink)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    total = args.events // args.partitions * args.partitions
    sinks = ["local", "azurite"]
    groups = [f"{s}-{r}" for r in range(args.rounds) for s in sinks]
    with tempfile.TemporaryDirectory(prefix="eh-bench-delta-") as tmp, ExitStack() as stack:
        em = stack.enter_context(EmulatorProcess(
            Path(tmp) / "eh", hubs={"bench": args.partitions}, consumer_groups={"bench": groups},
            extra_args=["--log-level", "WARNING"],
        ))
        azurite = stack.enter_context(AzuriteProcess(Path(tmp) / "azurite"))
        BlobServiceClient.from_connection_string(azurite.connection_string).create_container("lake")
        conn_str = em.connection_string("bench")
        warm_delta(Path(tmp) / "warm")
        publish(conn_str, args.partitions, total)
        plain_s: list[float] = []
        ratios: dict[str, list[float]] = {s: [] for s in sinks}
        commits: dict[str, list[int]] = {s: [] for s in sinks}
        files: dict[str, list[int]] = {s: [] for s in sinks}
        for r in range(args.rounds):
            plain = plain_receive(conn_str, total, 500)
            plain_s.append(plain)
            for sink in sinks:
                if sink == "local":
                    uri, options = str(Path(tmp) / f"lake-{r}" / "orders"), None
                else:
                    uri, options = f"az://lake/orders-{r}", azurite_options(azurite.connection_string)
                took, n_commits, n_files = ingest_delta(conn_str, azurite.connection_string, f"{sink}-{r}", uri, options,
                                                        total, args.batch_seconds)
                ratios[sink].append(plain / took)
                commits[sink].append(n_commits)
                files[sink].append(n_files)
            print(f"round {r + 1}: plain {total / plain:.0f} events/s; " + ", ".join(
                f"delta {s} ratio {ratios[s][-1]:.3f}, {commits[s][-1]} commits, {files[s][-1]} files" for s in sinks),
                flush=True)
    scale = 100_000 / total
    plain_eps = total / statistics.median(plain_s)
    print(f"{total} events over {args.partitions} partitions, {args.rounds} rounds; medians")
    print(" ".join(f"ratio_delta_{s}={statistics.median(ratios[s]):.3f}" for s in sinks) + " "
          + " ".join(f"commits_per_100k_{s}={statistics.median(commits[s]) * scale:.0f} "
                     f"files_per_100k_{s}={statistics.median(files[s]) * scale:.0f}" for s in sinks)
          + f" plain_eps={plain_eps:.0f}")
    for mismatch in MISMATCHES:
        print(f"MISMATCH {mismatch}")
    return 1 if MISMATCHES else 0


if __name__ == "__main__":
    raise SystemExit(main())
