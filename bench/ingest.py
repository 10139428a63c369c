"""Transactional ingestion into SQLite, Postgres, MariaDB and Delta tables vs. the SDK's plain receive loop, over the same events.

Starts its own local Event Hubs endpoint, Azurite and throwaway Postgres and MariaDB servers (where
Debian's ``postgresql`` / ``mariadb-server`` are installed), publishes ``--events`` (100,000) stamped
JSON events over the hub's partitions, then, in the same run, ``--rounds`` (5) times in turn, for each
sink of ``--sinks`` (all by default):

- ``plain``: ``EventHubConsumerClient.receive_batch`` over every partition (batches of 500), counting
  events and doing nothing else (no checkpoint, no storage): the floor any consumer pays; run right
  before each sink's ingestion, so that a ratio's two sides share the machine's moment;
- ``ingest`` into the sink: one :class:`~airflow_provider_eh.ingest.IngestRun` with what
  ``EventHubIngestOperator`` passes when not told otherwise (``batch_bytes`` 4 MiB and ``batch_seconds`` 0.25
  on a SQL sink, ``--sql-batch-seconds``; 64 MiB and ``batch_seconds`` 10 on a Delta sink): ownership claims, per batch one
  transaction (rows, dedupe marks, checkpoint compare-and-set) or one Delta commit, the standard blob
  checkpoint on Azurite. Each sink and round reads the same events through a consumer group of its own,
  into a table of its own: ``delta-local`` a Delta table on local disk, ``delta-azurite`` one in an
  Azurite container (``az://``). After a Delta run its log is read back: its commits and data files,
  scaled to 100,000 events. delta-rs imports pandas at a process's first write (1 to 3 s, once per task
  in a worker): a throwaway table is written before anything is timed.

Each round's ratio is the plain loop's time over the ingestion's, measured back to back. Each round
also runs the plain loop and the SQLite ingestion over WebSockets (the endpoint's WebSocket listener,
the connection's ``transport=websocket``; ``--no-websocket`` skips it): ``ratio_sqlite_ws`` compares the
two there, and ``ws_cost_sqlite`` is the ingestion's time over WebSockets over its time over TCP. The
last line gives the medians over the rounds, ``ratio_<sink>=... ingest_eps_<sink>=... plain_eps=...
commits_per_100k_delta_local=... files_per_100k_delta_local=... commits_per_100k_delta_azurite=...
files_per_100k_delta_azurite=... ratio_sqlite_ws=... ws_cost_sqlite=... cpu_us_plain=... cpu_us_<sink>=...
machine_us_plain=... machine_us_<sink>=... load_min=... load_max=...`` (``cpu_us``: the process's CPU time
per event, every thread's, of the plain loop and of each sink's ingestion, a figure the machine's load moves
far less than the ratios; the database servers' CPU is not in it, ``machine_us`` has it; the one-minute load
average at the start of each round: the machine is often shared). A run that loaded an event twice or not at
all prints ``MISMATCH`` and exits 1.

Where the time went when ingestion ran at 0.29 of the plain loop (20,000 events, 4 partitions,
batches of 500, SQLite; ``python -m cProfile`` of the committing thread, 7.5 s of ingestion):

- 1.64 s (22 %) writing the blob checkpoint after every commit (two blob writes per batch: one per
  namespace spelling), with the next batch waiting on it;
- 1.64 s (22 %) turning SDK events into ``IngestEvent`` (body join, property decoding);
- 1.27 s (17 %) the batch in SQL: 0.77 s the row function (``json.loads`` per event), 0.30 s the
  ``executemany`` of rows, the rest marks and the checkpoint;
- 0.84 s the partition properties read once at start, 0.21 s ownership claims;
- the rest waiting for the links (each partition's link received only while its batch was queued).

What changed, in the order it paid: a transaction takes every chunk of its partition already
received (batches by bytes and by what arrived in ``max_wait_time``, not by a fixed count), so
per-transaction costs are paid once per several hundred to thousands of events, while the links
keep receiving into a bounded queue; the blob checkpoint is written behind the commits by a thread
of its own, a partition's at most once a second (``checkpoint_interval``) and its last at the end;
one thread receives every partition (an ``EventProcessor`` per partition spun on the interpreter
lock until its partition listing came back); events are built on the receiving thread straight from
the decoded AMQP messages instead of through the SDK's ``EventData`` (checked against it on each
link's first messages, ``client/received_fields.py``); SQLite rows go as multi-row ``INSERT``s and Postgres
rows through ``COPY`` (``executemany`` handed the interpreter lock around, or made a round trip, per
row).

The SQL sinks' calls per batch. Every call that waits on the database server hands the interpreter
lock to the receiving thread and has to win it back. A Postgres batch made 7 calls (6 and the commit)
and one more per 8 KiB of ``COPY`` data (psycopg2's default read size); it now makes 4 queries: the
dedupe marks read, ``SAVEPOINT`` + ``COPY`` (its data in one message), ``RELEASE`` + the marks + the
checkpoint's compare-and-set (psycopg2 sends ``"a; b; c"`` as one query), and the commit. ``strace``
of the committing process over 40 batches of 500 events (its set-up included): 657 sends before, 299 after (the ``COPY``'s data
and its end are sends of their own). A MariaDB batch made 7 calls (6 and the commit) and now makes 5
(301 sends before, 221 after): InnoDB undoes a failed statement by itself, so a batch written as one
``INSERT`` needs no savepoint. PyMySQL's ``executemany`` formatted
each row through its general parameter code; the package writes the ``VALUES`` with PyMySQL's own
converters (``pymysql_values``). The commit path alone (``BatchProcessor.process``, the checkpoint and
the commit; 20,000 rows of this benchmark in batches of 500, the best of 5 runs of thread CPU time,
the server's CPU time from ``/proc``; machine shared with other test runs), per row: SQLite 12.6 to 14.0 µs
of the committing thread (its path unchanged); Postgres 11.4 to 14.1 µs and 4.5 to 5.5 µs of the server's, the same before and
after; MariaDB 19.5 µs before and 12.9 µs after, and 11.5 and 9.5 µs of the server's.

Where the time goes now (100,000 events, SQLite; ``py-spy record --gil --threads``, which samples
whichever thread holds the interpreter lock; per event):

- plain loop, one receiving thread: 45 µs, of it 19 µs reading and decoding frames (the SDK's
  pure-Python AMQP) and 16 µs building ``EventData``;
- ingestion's receiving thread: 35 µs, of it 23 µs reading and decoding the same frames and 8 µs
  building the ``IngestEvent`` from the message (property names decoded once per link, enqueued
  times shared by the events of one send);
- ingestion's committing thread: 19 µs, of it 7 µs the default row function (``json.loads``, the
  row dict) and the rest dedupe, parameter tuples and the driver's SQL calls; the blob-checkpoint
  thread: under 2 µs.

What bounds the ratio: the interpreter lock. Receiving and committing overlap in time, but only one
of them runs Python at once, so ingestion costs the sum, about 55 µs of lock time per event against
the plain loop's 45, plus fixed costs per run: the partitions' last sequence numbers (two rounds of
SDK management requests at ~0.4 s each: the SDK polls every step of a management link's set-up every
50 ms), ownership claims and release, and a link per partition, about 1 s together, which a run of
20,000 events does not amortise (ratio ~0.65 there, ~0.75 at 100,000).

Per event in CPU time (2026-11-29), which a loaded machine moves far less than wall time: each thread's
``time.thread_time`` in runs of 100,000 events (load average 11 to 16), and the ingestion's own Python
replayed alone on 4,000 messages captured from the local endpoint (the reader's callback, then the drain,
the processor and the SQLite transaction; best of 7). The plain loop used 29.5 µs of the process's CPU
per event, ingestion into SQLite 35.5 to 36.4: its receiving thread about 26, its committing thread 6 to 7
while draining (2 more for the set-up, claims, release and the blob checkpoints). Ingestion does not
build the SDK's ``EventData`` (about 10 µs of the plain loop's), and pays instead:

- the receiver runtime metric (``track_last_enqueued``, each batch's lag from the stream): the hub adds
  four delivery annotations to every message and the SDK's pure-Python decoder decodes them all (a map,
  five strings, two timestamps): the plain loop with it on used 33.4 µs instead of 29.5, 3.9 µs per
  event, the largest single cost. Runs no longer ask for it: they read the partitions' ends every
  ``lag_interval`` (``ingest/hub_ends.py``); on a quiet machine SQLite's ratio went from 0.840 to 0.925
  and its CPU per event from 38.8 to 33.9 µs (the endpoint no longer encodes the annotations either);
- the events built from the messages: 2.9 µs per event, now 1.9 (a link's batch read in one loop, the
  ``IngestEvent``'s attributes set in one step rather than through the frozen dataclass's ``__init__``,
  one reconnection marker per link instead of one per message);
- the committing thread's Python (the drain, the stamps and dedupe, ``json()`` and the row, the SQL):
  3.8 µs per event, now 3.0 (``json()`` through the decoder's scanner without its two whitespace matches,
  the stamps read in one loop, the typed-event check skipped for an untyped event, each chunk's sizes
  summed once and not filtered when it lies within the range).

Then the garbage collector. ``gc.callbacks`` timing each collection by the benchmark's phase (one round,
SQLite, with PyArrow, pandas and deltalake imported as the Delta sinks import them): during the plain loop
3 full collections took 0.11 s; during ingestion 12 took 0.64 s, 6.4 µs per event. A run's events outlive
the young collections (they wait in the receive queue and in the batch being gathered), and once the
survivors reach a quarter of the older objects CPython makes a full pass over every object of the
process. The SQL sinks measured alone, without those imports, lost none of that and ran at 0.98 to 1.05:
the difference between the rows with and without the Delta sinks. A run now leaves the objects it found
out of the full passes for its length (``gc.freeze()``/``gc.unfreeze()``, ``ingest/garbage_collection.py``): the same
round's full collections during ingestion took 0.37 s for 25 (two rounds), and ingestion used 27.1 µs of
CPU per event against the plain loop's 30.6. In an Airflow task the older objects are all of Airflow's,
more than here.

``machine_us_<side>`` is every process's CPU per event over the same span (``/proc/stat``): the local
endpoint's and the database server's with the benchmark's own.

The plain loop's first batch arrived 0.65 to 0.9 s after it started (its ``EventProcessor`` lists the
partitions first), ingestion's first chunk after 0.1 to 0.3 s; its last commit came 0.05 to 0.1 s after
its last receive and the run ended 0.1 to 0.2 s later (the blob checkpoints' flush, the mirror's
repair, the claims' release).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _filling import fill  # noqa: E402  (bench/, this script's folder)
from azure.eventhub import EventData, EventHubConsumerClient  # noqa: E402
from azure.storage.blob import BlobServiceClient  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.network import NetworkOptions  # noqa: E402
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream  # noqa: E402
from airflow_provider_eh.ingest.limits import SQL_BATCH_SECONDS  # noqa: E402
from airflow_provider_eh.ingest.sinks.delta import DELTA_BATCH_BYTES, DeltaIngestStore, DeltaTarget  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402
from tests.support.databases import mariadb_server, postgres_server  # noqa: E402


def publish(conn_str: str, partitions: int, events: int) -> None:
    """Fill each partition with ``events // partitions`` stamped events through the plain SDK."""

    def stamped(p: int, seq: int) -> EventData:
        event = EventData(json.dumps({"id": f"{p}-{seq}", "amount": seq % 97, "note": "x" * 100}))
        event.properties = {"eh.group": "bench", "eh.seq": seq, "eh.batch": "b0", "eh.owner": 1}
        return event

    fill(conn_str, partitions, events // partitions, stamped)


def plain_receive(conn_str: str, total: int, batch_size: int, network: NetworkOptions | None = None) -> float:
    """Seconds the plain SDK's consumer takes to receive ``total`` events (the ratio's baseline)."""
    consumer = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default",
                                                             **(network.client_kwargs() if network else {}))
    received = 0
    done = threading.Event()
    lock = threading.Lock()

    def on_batch(_ctx: object, events: list[EventData]) -> None:
        nonlocal received
        with lock:
            received += len(events)
            if received >= total:
                done.set()

    started, cpu, busy = time.perf_counter(), time.process_time(), machine_busy()
    worker = threading.Thread(
        target=consumer.receive_batch,
        kwargs={"on_event_batch": on_batch, "starting_position": "-1", "max_batch_size": batch_size,
                "prefetch": batch_size, "max_wait_time": 0.5},
        daemon=True,
    )
    worker.start()
    if not done.wait(600):
        raise SystemExit(f"plain receive got only {received} of {total} events")
    elapsed = time.perf_counter() - started
    CPU_SECONDS["plain"] = time.process_time() - cpu
    BUSY_SECONDS["plain"] = machine_busy() - busy
    consumer.close()
    worker.join(30)
    return elapsed


def ingest(conn_str: str, blob_conn_str: str, conn: Any, group: str, table: str, total: int,
           network: NetworkOptions | None = None, batch_seconds: float = SQL_BATCH_SECONDS) -> float:
    """One ingestion run with default limits as consumer group ``group`` into ``conn``'s ``table``; its seconds."""
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE {table} (id VARCHAR(40) NOT NULL, amount INTEGER, note TEXT)")
    conn.commit()
    container = BlobServiceClient.from_connection_string(blob_conn_str).create_container(f"bench-{group}")
    endpoint = EventHubsEndpoint.from_connection_string(conn_str, network=network)
    stream = Stream(endpoint.namespace, endpoint.eventhub_name, group)
    store = SqlIngestStore(conn, stream)
    run = IngestRun(
        endpoint, group, store, BatchProcessor(table), owner_id="bench", container_client=container,
        limits=RunLimits(batch_seconds=batch_seconds),  # the defaults, as EventHubIngestOperator passes them
    )
    started, cpu, busy = time.perf_counter(), time.process_time(), machine_busy()
    summary = run.run()
    elapsed = time.perf_counter() - started
    CPU_SECONDS["ingest"] = time.process_time() - cpu
    BUSY_SECONDS["ingest"] = machine_busy() - busy
    cur = conn.cursor()
    cur.execute(f"SELECT id FROM {table}")
    ids = [r[0] for r in cur.fetchall()]
    store.close()
    if summary["events"] != total or len(set(ids)) != total or len(ids) != total:
        MISMATCHES.append(f"{group}: ingest applied {summary['events']} events and {len(ids)} rows ({len(set(ids))} "
                          f"distinct ids), expected {total}; {_missing(ids, total, summary)}")
        print(MISMATCHES[-1], flush=True)
    return elapsed


MISMATCHES: list[str] = []
# the process's CPU seconds (every thread's) of the last plain loop and the last ingestion, beside their wall time:
# a figure the machine's load moves far less than the time
CPU_SECONDS: dict[str, float] = {}
# the machine's CPU seconds (every process's: the endpoint's and the database server's too) over the same spans
BUSY_SECONDS: dict[str, float] = {}


def machine_busy() -> float:
    """Seconds of CPU every process of the machine has used since boot (``/proc/stat``: all but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
DELTA_BATCH_SECONDS = 10.0  # EventHubIngestOperator's batch_seconds on a Delta sink


def azurite_options(conn_str: str) -> dict[str, str]:
    """delta-rs options for Azurite's connection string (what ``BlobStorageHook.delta_storage_options`` gives)."""
    parts = dict(p.split("=", 1) for p in conn_str.split(";") if p)
    return {"azure_storage_account_name": parts["AccountName"], "azure_storage_account_key": parts["AccountKey"],
            "azure_storage_endpoint": parts["BlobEndpoint"], "allow_http": "true"}


def warm_delta(path: Path) -> None:
    """A first write of a throwaway table: delta-rs imports pandas at its first write in a process (1 to 3 s),
    which a worker pays once per task and the first timed run should not."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(path), pa.table({"id": ["warm"]}))


def ingest_delta(conn_str: str, blob_conn_str: str, group: str, uri: str, options: dict[str, str] | None,
                 total: int, batch_seconds: float = DELTA_BATCH_SECONDS) -> tuple[float, int, int]:
    """One run into the Delta table ``uri`` with what ``EventHubIngestOperator(sink="delta")`` passes when not told
    otherwise: its seconds, and the table's commits and data files as its log holds them afterwards."""
    from deltalake import DeltaTable

    container = BlobServiceClient.from_connection_string(blob_conn_str).create_container(f"bench-{group}")
    endpoint = EventHubsEndpoint.from_connection_string(conn_str)
    store = DeltaIngestStore(DeltaTarget(uri, options), Stream(endpoint.namespace, endpoint.eventhub_name, group))
    run = IngestRun(endpoint, group, store, BatchProcessor("delta_table"), owner_id="bench", container_client=container,
                    limits=RunLimits(batch_bytes=DELTA_BATCH_BYTES, batch_seconds=batch_seconds))
    started, cpu, busy = time.perf_counter(), time.process_time(), machine_busy()
    summary = run.run()
    elapsed = time.perf_counter() - started
    CPU_SECONDS["ingest"] = time.process_time() - cpu
    BUSY_SECONDS["ingest"] = machine_busy() - busy
    table = DeltaTable(uri, storage_options=options)
    ids = table.to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    if summary["events"] != total or len(set(ids)) != total or len(ids) != total:
        MISMATCHES.append(f"{group}: ingest applied {summary['events']} events and {len(ids)} rows ({len(set(ids))} "
                          f"distinct ids), expected {total}; {_missing(ids, total, summary)}")
        print(MISMATCHES[-1], flush=True)
    return elapsed, len(table.history()), len(table.file_uris())


def _missing(ids: list[str], total: int, summary: dict[str, Any]) -> str:
    """Which events a run did not load (ids are ``<partition>-<seq>``), and what its partitions report."""
    partitions = summary["partitions"]
    per = total // max(1, len(partitions))
    seen = set(ids)
    missing = [f"{p}-{s}" for p in sorted(partitions) for s in range(per) if f"{p}-{s}" not in seen]
    counts = {p: {k: r[k] for k in ("events", "rows", "duplicates", "dead_letters", "batches")} for p, r in partitions.items()}
    return f"missing ids {missing[:10]}, partitions {counts}"


SINKS = ("sqlite", "postgres", "mariadb", "delta-local", "delta-azurite")


def main() -> int:
    """Compare ingestion into each sink with a plain receive of the same events; print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="plain and ingestion runs, interleaved; medians are reported")
    parser.add_argument("--sinks", default=",".join(SINKS), help=f"comma-separated, of {', '.join(SINKS)}")
    parser.add_argument("--no-websocket", action="store_true", help="skip the WebSocket pass")
    parser.add_argument("--sql-batch-seconds", type=float, default=SQL_BATCH_SECONDS,
                        help="batch_seconds of the SQL sinks (0: a commit per receive, as before 2026-11-29)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    total = args.events // args.partitions * args.partitions
    wanted = [s.strip() for s in args.sinks.split(",") if s.strip()]
    unknown = set(wanted) - set(SINKS)
    if unknown:
        raise SystemExit(f"--sinks: {sorted(unknown)} are not among {', '.join(SINKS)}")
    websocket_pass = not args.no_websocket and "sqlite" in wanted
    groups = [f"{db}-{r}" for r in range(args.rounds) for db in [*wanted, "sqlite-ws"]]
    with tempfile.TemporaryDirectory(prefix="eh-bench-ingest-") as tmp, ExitStack() as stack:
        em = stack.enter_context(EmulatorProcess(
            Path(tmp) / "eh", hubs={"bench": args.partitions}, consumer_groups={"bench": groups},
            extra_args=["--log-level", "WARNING"],
        ))
        azurite = stack.enter_context(AzuriteProcess(Path(tmp) / "azurite"))
        connect: dict[str, Any] = {}
        for db in wanted:
            if db == "sqlite" or db.startswith("delta-"):
                connect[db] = None
            elif db == "postgres":
                dsn = stack.enter_context(postgres_server())
                if dsn is None:
                    raise SystemExit("no Postgres server installed (initdb, postgres); apt-get install postgresql")
                import psycopg2

                connect[db] = lambda dsn=dsn: psycopg2.connect(dsn)
            else:
                mariadb = stack.enter_context(mariadb_server())
                if mariadb is None:
                    raise SystemExit("no MariaDB server installed (mariadbd); apt-get install mariadb-server")
                import pymysql

                connect[db] = lambda mariadb=mariadb: pymysql.connect(**mariadb)
        if "delta-azurite" in wanted:
            BlobServiceClient.from_connection_string(azurite.connection_string).create_container("lake")
        if any(db.startswith("delta-") for db in wanted):
            warm_delta(Path(tmp) / "warm")
        conn_str = em.connection_string("bench")
        websocket = NetworkOptions.from_fields({"transport": "websocket", "custom_endpoint_address": em.websocket_address})
        publish(conn_str, args.partitions, total)
        plain_s: list[float] = []
        plain_cpu: list[float] = []
        plain_busy: list[float] = []
        cpu_s: dict[str, list[float]] = {db: [] for db in connect}
        busy_s: dict[str, list[float]] = {db: [] for db in connect}
        ws_ratios: list[float] = []
        ws_costs: list[float] = []
        seconds: dict[str, list[float]] = {db: [] for db in connect}
        ratios: dict[str, list[float]] = {db: [] for db in connect}
        commits: dict[str, list[int]] = {db: [] for db in connect if db.startswith("delta-")}
        files: dict[str, list[int]] = {db: [] for db in commits}
        loads: list[float] = []
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for db, opener in connect.items():
                # the plain loop right before each sink, so that a ratio's two sides share the machine's moment
                plain = plain_receive(conn_str, total, 500)
                plain_s.append(plain)
                plain_cpu.append(CPU_SECONDS["plain"])
                plain_busy.append(BUSY_SECONDS["plain"])
                if db.startswith("delta-"):
                    uri, options = ((str(Path(tmp) / f"lake-{r}" / "orders"), None) if db == "delta-local"
                                    else (f"az://lake/orders-{r}", azurite_options(azurite.connection_string)))
                    took, n_commits, n_files = ingest_delta(conn_str, azurite.connection_string, f"{db}-{r}", uri,
                                                            options, total)
                    commits[db].append(n_commits)
                    files[db].append(n_files)
                else:
                    if opener is None:  # a fresh SQLite file per round, in WAL mode as a deployment would run it
                        path = Path(tmp) / f"sink-{r}.db"
                        with sqlite3.connect(path) as conn:
                            conn.execute("PRAGMA journal_mode = WAL")
                        conn = sqlite3.connect(path)
                    else:
                        conn = opener()
                    took = ingest(conn_str, azurite.connection_string, conn, f"{db}-{r}", f"orders_{r}", total,
                                  batch_seconds=args.sql_batch_seconds)
                seconds[db].append(took)
                cpu_s[db].append(CPU_SECONDS["ingest"])
                busy_s[db].append(BUSY_SECONDS["ingest"])
                ratios[db].append(plain / took)
            line = f"round {r + 1} (load {loads[-1]:.1f}): " + ", ".join(
                f"{db} {total / s[-1]:.0f} events/s (ratio {ratios[db][-1]:.3f})" for db, s in seconds.items())
            if websocket_pass:
                plain_ws = plain_receive(conn_str, total, 500, websocket)
                path = Path(tmp) / f"sink-ws-{r}.db"
                with sqlite3.connect(path) as conn:
                    conn.execute("PRAGMA journal_mode = WAL")
                took_ws = ingest(conn_str, azurite.connection_string, sqlite3.connect(path), f"sqlite-ws-{r}",
                                 f"orders_{r}", total, websocket, args.sql_batch_seconds)
                ws_ratios.append(plain_ws / took_ws)
                ws_costs.append(took_ws / seconds["sqlite"][-1])
                line += (f"; over WebSockets: plain {total / plain_ws:.0f}, sqlite {total / took_ws:.0f} events/s "
                         f"(ratio {ws_ratios[-1]:.3f})")
            line += "".join(f"; {db}: {commits[db][-1]} commits, {files[db][-1]} files" for db in commits)
            print(line, flush=True)
    plain_eps = total / statistics.median(plain_s)
    eps = {db: total / statistics.median(s) for db, s in seconds.items()}
    ratio = {db: statistics.median(r) for db, r in ratios.items()}
    scale = 100_000 / total
    name = {db: db.replace("-", "_") for db in eps}
    print(f"{total} events over {args.partitions} partitions, {args.rounds} rounds; plain loop in batches of 500 right "
          "before each ingestion, ingestion with default limits; medians; load average "
          f"{min(loads):.1f} to {max(loads):.1f}")
    print(f"plain SDK receive:        {plain_eps:10.0f} events/s")
    for db in eps:
        print(f"ingestion into {db:13}  {eps[db]:10.0f} events/s (ratio {ratio[db]:.3f})")
    print(
        " ".join(f"ratio_{name[db]}={ratio[db]:.3f}" for db in eps) + " "
        + " ".join(f"ingest_eps_{name[db]}={eps[db]:.0f}" for db in eps) + f" plain_eps={plain_eps:.0f}"
        + "".join(f" commits_per_100k_{name[db]}={statistics.median(commits[db]) * scale:.0f}"
                  f" files_per_100k_{name[db]}={statistics.median(files[db]) * scale:.0f}" for db in commits)
        + (f" ratio_sqlite_ws={statistics.median(ws_ratios):.3f} ws_cost_sqlite={statistics.median(ws_costs):.3f}"
           if ws_ratios else "")
        + f" cpu_us_plain={statistics.median(plain_cpu) / total * 1e6:.1f} "
        + " ".join(f"cpu_us_{name[db]}={statistics.median(c) / total * 1e6:.1f}" for db, c in cpu_s.items())
        + f" machine_us_plain={statistics.median(plain_busy) / total * 1e6:.1f} "
        + " ".join(f"machine_us_{name[db]}={statistics.median(c) / total * 1e6:.1f}" for db, c in busy_s.items())
        + f" load_min={min(loads):.1f} load_max={max(loads):.1f}"
    )
    for mismatch in MISMATCHES:  # a run that loaded an event twice or not at all fails the benchmark, figures or not
        print(f"MISMATCH {mismatch}")
    return 1 if MISMATCHES else 0


if __name__ == "__main__":
    sys.exit(main())
