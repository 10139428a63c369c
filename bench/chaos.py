"""Chaos: randomized publish runs, each SIGKILLed at a random moment or hit by an endpoint fault, then
retried until it succeeds, while a backfill publishes other intervals of the same producer groups;
then every partition of every hub is read back and checked.

``python bench/chaos.py --runs 200 --seed 1``

One local Event Hubs endpoint and one Azurite serve the whole run. Hubs of 1 to 8 partitions; each
run publishes a batch of mixed size (1 to 1500 events of up to 8 KB, by partition id or by key)
with the blob state store (Azurite) or the Airflow Variables store (a SQLite metadata DB in a
temporary AIRFLOW_HOME, migrated once), in a child process of its own. The first attempt is
disrupted, and what disrupts it is chosen by the seed, never by the clock: SIGKILL at a protocol
step the attempt is bound to reach (``airflow_provider_eh.testing.crash``: after the claim, after the
intent, after the K-th SDK batch of a partition where K is at most the batches its bytes need,
after the send, during the commit), or an endpoint fault (drop_after within the attempt's own
transfers, store_no_ack, server_busy, delay_ack) on the run's hub, held until it has fired and
lifted a seeded while later, or a pause: SIGSTOP at a step the attempt reaches (after the intent,
before or after its K-th SDK batch of a partition), as a frozen VM or a long GC pause stops one; a
short pause (under 3 s) is simply continued, a long one (blob runs) outlasts the lease: a retry takes
the partitions over and commits while the paused attempt is stopped, then it is continued (the hub
fences its late sends; its claim's deadline stops it at its next check). An attempt that ends before
its disruption took effect (it failed early, say on a lease held by a killed run) is disrupted again;
a run counts as disrupted only when an attempt was killed or ran under a fault that fired. Retries may
be killed again; the last one runs clean. Meanwhile a backfill process works through other intervals
in the same blob producer groups, so it fights the runs for the partitions' leases. ``--spark-runs K``
(default 4) makes K of the runs Spark runs (the driver/executor split of
``airflow_provider_eh.spark``, through the same driver loop; slow: each attempt starts a JVM). They
are disrupted the same ways, as the seed says: SIGKILL of the driver at a protocol step it reaches
(the claim, the intent, after the send, the commit; ``mid_send`` is reached on executors, so it is not
among them), an endpoint fault, or SIGKILL once the hub has taken events of theirs or after a seeded
delay, whichever comes first. A killed attempt takes its whole session with it (the driver's JVM and
Python workers).

The check: every expected event id is in the hub exactly once (``duplicates`` counts extra copies,
``losses`` missing ids), on the partition it was meant for, and ``eh.seq`` strictly increases in
log order per (hub, partition, producer group). Exit status 1 on any violation.

Attempts fork from a fork server that imported the SDK, the provider and Airflow once, so a child
starts in milliseconds; each is still a process of its own, killed with SIGKILL (its whole session).
``CHAOS_TRACE=1`` prints every attempt with its disruption, exit status and duration.

Last line: ``runs=… disrupted=… kills=… faults=… pauses=… events=… duplicates=… losses=…``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# A fixed Fernet key: every child must decrypt the Variables the previous one wrote.
FERNET_KEY = "t8tKM1Dc9vVqJ7q0d5qf3kE8u2m4b6m0Zr3xLw9yQ1A="
PARTITION_COUNTS = (1, 2, 3, 4, 5, 6, 7, 8)
SIZES = (1, 5, 40, 150, 400, 1500)
PADS = (0, 100, 1000, 8000)
# Steps every first attempt reaches; ``mid_send:K`` is added per batch for the K its bytes guarantee.
CRASH_POINTS = ("after_claim", "after_intent", "after_send", "during_commit")
# The endpoint's largest message: an SDK batch carries at most this many bytes of bodies.
SDK_BATCH_BYTES = 1024 * 1024
FAULTS = ("drop_after", "store_no_ack", "server_busy", "delay_ack")
MAX_ATTEMPTS = 12


# ---- what one batch is ------------------------------------------------------------------------

@dataclass(frozen=True)
class Batch:
    """One batch: everything a child needs to rebuild the same events on every attempt."""

    name: str  # unique; prefixes the event ids; makes the batch id
    hub: str
    partitions: int
    backend: str  # "blob" | "variable" | "spark"
    group: str
    events: int
    pad: int
    by_key: bool
    seed: int

    @property
    def batch_id(self) -> str:
        import hashlib

        return hashlib.sha256(f"chaos-v1/{self.group}/{self.name}".encode()).hexdigest()


def make_events(batch: Batch) -> list[dict[str, Any]]:
    """The batch's events, identical on every call (pads vary per event, up to ``batch.pad`` bytes)."""
    rng = random.Random(batch.seed)
    out = []
    for i in range(batch.events):
        body = {"id": f"{batch.name}-{i}", "pad": "x" * rng.randint(0, batch.pad)}
        event: dict[str, Any] = {"body": body, "properties": {"i": i}}
        if batch.by_key:
            event["partition_key"] = f"key-{rng.randrange(10_000)}"
        else:
            event["partition_id"] = str(rng.randrange(batch.partitions))
        out.append(event)
    return out


def sdk_batches_per_partition(batch: Batch) -> list[int]:
    """The fewest SDK batches each partition of ``batch`` needs (bodies alone; stamps only add bytes).

    The attempt is bound to reach ``mid_send:K`` for K up to the largest of these, and to make at
    least their sum in transfers on the hub.
    """
    from airflow_provider_eh.publishing import partition_for_key

    pids = [str(p) for p in range(batch.partitions)]
    size: Counter = Counter()
    for event in make_events(batch):
        pid = partition_for_key(event["partition_key"], pids) if batch.by_key else event["partition_id"]
        size[pid] += len(json.dumps(event["body"]))
    return [-(-n // SDK_BATCH_BYTES) for n in size.values() if n]


# ---- the child: one publish attempt -------------------------------------------------------------

# Imported once by the fork server; each attempt is a fresh process forked from it, so an attempt
# starts in milliseconds instead of re-importing the SDK (and Airflow, for the Variables store).
PRELOAD = ["azure.eventhub", "azure.storage.blob", "airflow_provider_eh.publishing",
           "airflow_provider_eh.hooks.producer_state"]


def child_entry(config: dict[str, Any], crash_at: str | None, files: dict[str, str]) -> None:
    """One attempt in its own process (and session, so a kill takes Spark's JVM too): publish the batch
    once; ``files["ready"]`` appears just before publishing, ``files["result"]`` holds the statuses."""
    os.setsid()
    fd = os.open(files["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    if crash_at:
        from airflow_provider_eh.testing.crash import crash_at as arm
        from airflow_provider_eh.testing.crash import pause_at

        if crash_at.startswith("pause:"):
            pause_at(crash_at.removeprefix("pause:"))
        else:
            arm(crash_at)
    try:
        statuses = publish_once(config, files["ready"])
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    Path(files["result"]).write_text(json.dumps(statuses))
    os._exit(0)


def publish_once(config: dict[str, Any], ready: str) -> dict[str, str]:
    """Publish the attempt's batch once through its backend (blob, Variables or Spark); the partitions' statuses."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", force=True)
    batch = Batch(**config["batch"])
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint

    endpoint = EventHubsEndpoint.from_connection_string(config["eh"], batch.hub)
    if batch.backend == "spark":
        return spark_child(config, batch, endpoint, ready)
    from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher

    events = make_events(batch)
    if batch.backend == "blob":
        from azure.storage.blob import ContainerClient

        container = ContainerClient.from_connection_string(config["blob"], config["container"])
        store: Any = BlobProducerStateStore(container, claim_timeout=config["claim_timeout"])
    else:
        from airflow_provider_eh.hooks.producer_state import AirflowVariables
        from airflow_provider_eh.publishing import VariableProducerStateStore

        store = VariableProducerStateStore(AirflowVariables())
    publisher = IdempotentPublisher(endpoint, store, producer_group=batch.group,
                                    send_timeout=config["send_timeout"], send_attempts=config["send_attempts"])
    Path(ready).touch()
    results = publisher.publish(events, batch_id=batch.batch_id)
    return {p: r.status for p, r in results.items()}


def spark_output(batch: Batch, path: Path) -> None:
    """The Spark run's input as Parquet (written once by the driver; every attempt reads the same files)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    events = make_events(batch)
    pq.write_table(pa.table({
        "body": [json.dumps(e["body"], sort_keys=True, separators=(",", ":")) for e in events],
        "key": [e.get("partition_key") for e in events],
        "partition": [e.get("partition_id") for e in events],
        "i": [e["properties"]["i"] for e in events],
    }), str(path))


def spark_child(config: dict[str, Any], batch: Batch, endpoint: Any, ready: str) -> dict[str, str]:
    """The Spark path: the driver claims and plans, executors fingerprint and send (blob state)."""
    from azure.storage.blob import ContainerClient

    from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher
    from airflow_provider_eh.spark.job import SparkPublishJob, SparkSource
    from airflow_provider_eh.spark.mapping import RowMapping
    from airflow_provider_eh.spark.session import SparkSettings, get_session

    container = ContainerClient.from_connection_string(config["blob"], config["container"])
    store = BlobProducerStateStore(container, claim_timeout=config["claim_timeout"])
    publisher = IdempotentPublisher(endpoint, store, producer_group=batch.group)
    spark, _ = get_session(SparkSettings(master="local[1]", conf={
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"}))
    spark.sparkContext.setLogLevel("ERROR")
    mapping = RowMapping(body_column="body", property_columns=("i",), order_by=("i",),
                         **({"key_column": "key"} if batch.by_key else {"partition_column": "partition"}))
    Path(ready).touch()
    try:
        job = SparkPublishJob(spark, publisher, mapping, send_timeout=config["send_timeout"],
                              send_attempts=config["send_attempts"])
        results = job.publish(SparkSource(path=config["spark_input"]), batch.batch_id)
    finally:
        spark.stop()
    return {p: r.status for p, r in results.items()}


# ---- the driver ---------------------------------------------------------------------------------

@dataclass
class Tally:
    """What the run saw, counted from every thread under ``lock``: runs, disruptions, outcomes, failures."""

    runs: int = 0
    disrupted: int = 0  # runs an attempt of which was killed, paused or ran under a fault that fired
    kills: int = 0
    faults: int = 0
    pauses: int = 0  # attempts seen stopped at their pause point
    long_pauses: int = 0  # of those, resumed only after a retry took over and committed
    attempts: int = 0
    backfill_batches: int = 0
    spark_runs: int = 0
    spark_disrupted: int = 0  # Spark runs an attempt of which was killed or ran under a fault that fired
    statuses: Counter = field(default_factory=Counter)
    disruptions: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


class Chaos:
    """Plans the batches, runs attempts in child processes, disrupts them, checks the hubs at the end."""

    def __init__(self, eh: Any, azurite: Any, *, runs: int, seed: int, workers: int, work_dir: Path,
                 variable_share: float = 0.3, spark_runs: int = 0, tag: str = "",
                 partition_counts: tuple[int, ...] = PARTITION_COUNTS, blob_groups: int = 1):
        self.eh = eh
        self.azurite = azurite
        self.rng = random.Random(seed)
        self.runs = runs
        self.workers = workers
        self.work_dir = work_dir
        self.variable_share = variable_share
        self.spark_runs = spark_runs
        self.tag = tag or f"{seed}-{os.getpid()}"
        self.container = f"chaos-{self.tag}".lower()[:60]
        self.hubs = {f"chaos-{self.tag}-p{n}".lower(): n for n in partition_counts}
        self.blob_groups = blob_groups
        self.variable_locks = {self.group(hub, "variable"): threading.Lock() for hub in self.hubs}
        self.fault_lock = threading.Lock()
        self.expected: list[Batch] = []
        self.tally = Tally()
        self.done = threading.Event()
        self.children: set[Any] = set()
        self.mp = multiprocessing.get_context("forkserver")
        self.mp.set_forkserver_preload(PRELOAD)
        self.children_lock = threading.Lock()

    # -- setup

    def setup(self) -> None:
        from azure.storage.blob import BlobServiceClient

        for hub, partitions in self.hubs.items():
            self.eh.admin.create_hub(hub, partitions=partitions)
        BlobServiceClient.from_connection_string(self.azurite.connection_string).create_container(self.container)

    def group(self, hub: str, backend: str, index: int = 0) -> str:
        # The Variables store is per group (its Variable names carry no hub), so a group per hub.
        kind = "var" if backend == "variable" else f"blob{index}"
        return f"chaos-{self.tag}.{kind}.p{self.hubs[hub]}".lower()

    def plan(self, name: str, rng: random.Random, backend: str | None = None) -> Batch:
        hub = rng.choice(sorted(self.hubs))
        if backend is None:
            backend = "variable" if rng.random() < self.variable_share else "blob"
        group = self.group(hub, "blob" if backend == "spark" else backend, rng.randrange(self.blob_groups))
        return Batch(name=name, hub=hub, partitions=self.hubs[hub], backend=backend, group=group,
                     events=rng.choice(SIZES), pad=rng.choice(PADS), by_key=rng.random() < 0.5,
                     seed=rng.randrange(2**31))

    # -- one attempt

    def attempt(self, batch: Batch, *, crash_at: str | None = None,
                kill_when: Callable[[float], bool] | None = None, send_timeout: float = 30.0,
                send_attempts: int = 3, on_stopped: Callable[[Any], None] | None = None) -> tuple[str, dict[str, str], str]:
        """One attempt in a child process: ``("ok", statuses, "")``, ``("killed", {}, "")`` or ``("failed", {}, stderr tail)``.

        ``kill_when``: polled with the seconds since the child began publishing; SIGKILL once it says so.
        ``on_stopped``: called with the child once it is seen stopped (``crash_at="pause:<step>"``); it
        must continue it (SIGCONT).
        """
        config = {"batch": asdict(batch), "eh": self.eh.connection_string(batch.hub),
                  "blob": self.azurite.connection_string, "container": self.container,
                  "claim_timeout": 45, "send_timeout": send_timeout, "send_attempts": send_attempts,
                  "spark_input": str(self.work_dir / f"{batch.name}.parquet")}
        with self.tally.lock:
            self.tally.attempts += 1
            base = self.work_dir / f"attempt-{self.tally.attempts}"
        files = {k: f"{base}.{k}" for k in ("ready", "result", "err")}
        began = time.monotonic()
        proc = self.mp.Process(target=child_entry, args=(config, crash_at, files), name=f"chaos-{batch.name}")
        proc.start()
        with self.children_lock:
            self.children.add(proc)
        try:
            if on_stopped is not None:
                import psutil

                while proc.is_alive():
                    try:
                        if psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED:
                            on_stopped(proc)
                            break
                    except psutil.NoSuchProcess:
                        break
                    time.sleep(0.01)
            if kill_when is not None:
                while proc.is_alive() and not os.path.exists(files["ready"]):
                    time.sleep(0.005)
                ready = time.monotonic()
                while proc.is_alive() and not kill_when(time.monotonic() - ready):
                    time.sleep(0.02)
                if proc.is_alive():
                    self.kill(proc)
            proc.join(300)
            if proc.is_alive():
                self.kill(proc)
                proc.join()
            if batch.backend == "spark":  # a driver killed at a step leaves its JVM behind in its session
                self.kill(proc)
        finally:
            with self.children_lock:
                self.children.discard(proc)
        code = proc.exitcode
        tail = Path(files["err"]).read_text(errors="replace")[-3000:] if os.path.exists(files["err"]) else ""
        result = Path(files["result"]).read_text() if code == 0 else ""
        for path in files.values():
            Path(path).unlink(missing_ok=True)
        if os.environ.get("CHAOS_TRACE"):
            print(f"    {time.strftime('%H:%M:%S')} {batch.name} {batch.backend} {batch.events}x{batch.pad} "
                  f"crash={crash_at} kill_when={kill_when is not None} -> {code} in {time.monotonic() - began:.1f}s",
                  file=sys.stderr, flush=True)
            if code not in (0, -signal.SIGKILL):
                print("      " + "\n      ".join(tail.strip().splitlines()[-3:]), file=sys.stderr, flush=True)
        if code == -signal.SIGKILL:
            self.tally.add(kills=1)
            return "killed", {}, ""
        if code == 0:
            return "ok", json.loads(result), ""
        return "failed", {}, f"exit {code}: {tail}"

    @staticmethod
    def kill(proc: Any) -> None:
        """SIGKILL the attempt's whole session: the child and anything it started (Spark's JVM)."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def disrupt(self, batch: Batch, rng: random.Random, *, faults_allowed: bool) -> tuple[tuple[str, dict[str, str], str], bool]:
        """An attempt disrupted as the seed says; returns its outcome and whether the disruption took effect."""
        kinds = ("crash", "fault") if faults_allowed else ("crash",)
        kind = rng.choice(kinds + ("spark_kill",) if batch.backend == "spark" else kinds + ("pause",))
        with self.tally.lock:
            self.tally.disruptions[kind] += 1
        if kind == "spark_kill":
            return self.spark_kill(batch, rng)
        if kind == "pause":
            return self.paused(batch, rng)
        if kind == "crash":
            most = 0 if batch.backend == "spark" else max(sdk_batches_per_partition(batch))  # Spark: driver steps
            points = CRASH_POINTS + tuple(f"mid_send:{k}" for k in range(1, most + 1))
            outcome = self.attempt(batch, crash_at=rng.choice(points))
            return outcome, outcome[0] == "killed"
        return self.faulted(batch, rng)

    def paused(self, batch: Batch, rng: random.Random) -> tuple[tuple[str, dict[str, str], str], bool]:
        """An attempt stopped (SIGSTOP) at a step it reaches, for a seeded while. A short pause is
        continued after it; a long one (blob runs: their retries may take the partitions over) is
        continued only once a retry, started while it is stopped, has waited out its leases and
        committed; the outcome is the retry's. The paused attempt's own end does not count."""
        most = max(sdk_batches_per_partition(batch))
        point = rng.choice(("after_intent",) + tuple(f"{step}:{k}" for step in ("before_send", "mid_send")
                                                     for k in range(1, most + 1)))
        long = batch.backend == "blob" and rng.random() < 0.5
        short = rng.uniform(0.2, 3.0)
        retried: list[tuple[str, dict[str, str], str]] = []
        stopped: list[bool] = []

        def on_stopped(proc: Any) -> None:
            stopped.append(True)
            self.tally.add(pauses=1, long_pauses=int(long))
            try:
                if long:
                    retried.append(self.attempt(batch))
                else:
                    time.sleep(short)
            finally:
                os.killpg(proc.pid, signal.SIGCONT)

        # one in-process attempt: once continued, a stopped attempt fails at its deadline check (or the
        # hub refuses its send) instead of waiting out retries; the run goes on with the retry's outcome
        outcome = self.attempt(batch, crash_at=f"pause:{point}", on_stopped=on_stopped, send_attempts=1)
        if retried:
            return retried[0], True
        return outcome, bool(stopped)

    def spark_kill(self, batch: Batch, rng: random.Random) -> tuple[tuple[str, dict[str, str], str], bool]:
        """A Spark attempt killed once the hub has taken events since it began, or after a seeded delay
        (most of it is the JVM starting), whichever comes first."""
        before = self.eh.admin.hub(batch.hub)["events"]
        delay = rng.uniform(0.0, 30.0)
        outcome = self.attempt(batch, kill_when=lambda waited: waited >= delay
                               or self.eh.admin.hub(batch.hub)["events"] > before)
        return outcome, outcome[0] == "killed"

    def faulted(self, batch: Batch, rng: random.Random) -> tuple[tuple[str, dict[str, str], str], bool]:
        """An attempt under an endpoint fault on its hub, held until it fired and then for a seeded
        while (the attempt may outlast it and recover in-process, or fail and be retried); other
        runs on the hub are hit too. One fault at a time: ``clear_faults`` clears them all."""
        fault = rng.choice(FAULTS)
        params: dict[str, Any] = {}
        if fault == "drop_after":  # within the transfers this attempt is bound to make
            params["transfers"] = rng.randint(1, sum(sdk_batches_per_partition(batch)))
        elif fault == "delay_ack":
            params["ms"] = rng.choice((500, 1500, 3000))
        window = rng.uniform(0.5, 3.0)
        fired_at: list[float] = []
        attempt_over = threading.Event()

        def watch() -> None:
            """Lift the fault ``window`` seconds after it first fired, or when the attempt is over."""
            while not attempt_over.wait(0.05):
                if not fired_at:
                    left = [f for f in self.eh.admin.faults() if f["kind"] == fault]
                    if not left or any(f["triggered"] > 0 for f in left):  # a fired one-shot fault is gone
                        fired_at.append(time.monotonic())
                elif time.monotonic() - fired_at[0] >= window:
                    break
            self.eh.admin.clear_faults()

        with self.fault_lock:
            self.eh.admin.set_fault(fault, hub=batch.hub, **params)
            watcher = threading.Thread(target=watch, name=f"fault-{batch.name}", daemon=True)
            watcher.start()
            try:
                outcome = self.attempt(batch, send_timeout=1.5, send_attempts=rng.choice((1, 2, 3)))
            finally:
                attempt_over.set()
                watcher.join()
        if fired_at:
            self.tally.add(faults=1)
        return outcome, bool(fired_at)

    def publish_until_done(self, batch: Batch, rng: random.Random, *, faults_allowed: bool, disrupted: bool = True) -> bool:
        """Disrupted until a disruption took effect (or the batch got through: then the run counts as
        undisrupted); retries killed again with falling odds; retried until one succeeds."""
        took_effect = False
        attempt = 0
        outcome: tuple[str, dict[str, str], str] = ("failed", {}, "not attempted")
        while outcome[0] != "ok":
            if outcome[0] == "failed" and attempt >= 3:
                self.tally.failures.append(f"{batch.name} attempt {attempt}: {outcome[2][-600:]}")
            if attempt >= MAX_ATTEMPTS:
                raise RuntimeError(f"{batch.name}: no success after {attempt} attempts: {outcome[2]}")
            attempt += 1
            if disrupted and not took_effect:
                outcome, took_effect = self.disrupt(batch, rng, faults_allowed=faults_allowed)
            elif disrupted and attempt <= 3 and rng.random() < 0.25:
                outcome, _ = self.disrupt(batch, rng, faults_allowed=False)
            else:
                outcome = self.attempt(batch)
        with self.tally.lock:
            self.tally.statuses.update(outcome[1].values())
        return took_effect

    # -- the run and the backfill

    def run_one(self, batch: Batch, seed: int) -> None:
        rng = random.Random(seed)
        if batch.backend == "variable":  # the Variables store is single-writer: its runs of one group in turn
            with self.variable_locks[batch.group]:
                disrupted = self.publish_until_done(batch, rng, faults_allowed=True)
        else:  # blob runs of one group contend for the partitions' leases, as concurrent Airflow runs would
            disrupted = self.publish_until_done(batch, rng, faults_allowed=True)
        spark = batch.backend == "spark"
        self.tally.add(runs=1, disrupted=int(disrupted), spark_runs=int(spark), spark_disrupted=int(spark and disrupted))
        done = self.tally.runs
        if done % 10 == 0 or done == self.runs:
            print(f"  {done}/{self.runs} runs ({self.tally.disrupted} disrupted), {self.tally.kills} kills, "
                  f"{self.tally.faults} faults ({time.strftime('%H:%M:%S')})", flush=True)

    def backfill(self, seed: int) -> None:
        """Other intervals, one after another, in the runs' blob producer groups (lease contention)."""
        rng = random.Random(seed)
        k = 0
        while not self.done.is_set():
            batch = self.plan(f"bf{k}", rng, backend="blob")
            self.expected.append(batch)
            self.publish_until_done(batch, rng, faults_allowed=False, disrupted=rng.random() < 0.3)
            self.tally.add(backfill_batches=1)
            k += 1

    def run(self) -> None:
        self.setup()
        spark_at = set(self.rng.sample(range(self.runs), min(self.spark_runs, self.runs)))
        batches = [self.plan(f"r{i}", self.rng, backend="spark" if i in spark_at else None) for i in range(self.runs)]
        for batch in batches:
            if batch.backend == "spark":
                spark_output(batch, self.work_dir / f"{batch.name}.parquet")
        self.expected.extend(batches)
        seeds = [self.rng.randrange(2**31) for _ in batches]
        with ThreadPoolExecutor(max_workers=self.workers + 1, thread_name_prefix="chaos") as pool:
            backfill = pool.submit(self.backfill, self.rng.randrange(2**31))
            try:
                for future in [pool.submit(self.run_one, b, s) for b, s in zip(batches, seeds, strict=True)]:
                    future.result()
            finally:
                self.done.set()
                backfill.result()

    def kill_children(self) -> None:
        with self.children_lock:
            for proc in list(self.children):
                if proc.is_alive():
                    self.kill(proc)

    # -- the check

    def check(self) -> dict[str, int]:
        from airflow_provider_eh.client.endpoint import EventHubsEndpoint
        from airflow_provider_eh.client.readback import read_hub
        from airflow_provider_eh.publishing import partition_for_key

        where: dict[str, str] = {}  # event id -> hub/partition it must be on
        for batch in self.expected:
            pids = [str(p) for p in range(batch.partitions)]
            for event in make_events(batch):
                pid = partition_for_key(event["partition_key"], pids) if batch.by_key else event["partition_id"]
                where[event["body"]["id"]] = f"{batch.hub}/{pid}"
        seen: Counter = Counter()
        misplaced = stamp_breaks = 0
        for hub in self.hubs:
            endpoint = EventHubsEndpoint.from_connection_string(self.eh.connection_string(hub), hub)
            last: dict[tuple[str, str], int] = {}
            for event in read_hub(endpoint):
                event_id = json.loads(event.body)["id"]
                seen[event_id] += 1
                if where.get(event_id) != f"{hub}/{event.partition}":
                    misplaced += 1
                slot = (event.partition, event.properties["eh.group"])
                seq = int(event.properties["eh.seq"])
                if slot in last and seq <= last[slot]:
                    stamp_breaks += 1
                last[slot] = seq
        return {
            "events": len(where),
            "read": sum(seen.values()),
            "duplicates": sum(n - 1 for n in seen.values() if n > 1),
            "losses": sum(1 for event_id in where if seen[event_id] == 0),
            "unexpected": sum(1 for event_id in seen if event_id not in where),
            "misplaced": misplaced,
            "stamp_breaks": stamp_breaks,
        }


def migrate_airflow_home(home: Path) -> None:
    """A fresh SQLite metadata DB in ``home`` for the Variables store; the children inherit the env."""
    os.environ.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__FERNET_KEY": FERNET_KEY,
    })
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True)


def stop_fork_server() -> None:
    """Stop the fork server and resource tracker the attempts started: they would otherwise live as long
    as this interpreter (a test session's process, say). ``_stop`` is what CPython's own tests call."""
    from multiprocessing import forkserver, resource_tracker

    for server in (forkserver._forkserver, resource_tracker._resource_tracker):
        stop = getattr(server, "_stop", None)
        if stop is not None:
            stop()


def run_chaos(eh: Any, azurite: Any, *, runs: int, seed: int, workers: int = 8, variable_share: float = 0.3,
              spark_runs: int = 0, work_dir: Path | None = None, tag: str = "",
              partition_counts: tuple[int, ...] = PARTITION_COUNTS, blob_groups: int = 1) -> dict[str, int]:
    """Run the chaos against an endpoint and Azurite already running; returns the figures.

    The Variables store needs ``AIRFLOW_HOME`` / ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` of a migrated DB
    in the environment when ``variable_share > 0``. Attempts fork from a fork server that imports the
    SDK and the provider once; ``bench/`` must be on ``sys.path`` when this module is imported elsewhere.
    """
    started = time.monotonic()
    # before the fork server starts: every attempt must decrypt the Variables the previous one wrote
    os.environ.setdefault("AIRFLOW__CORE__FERNET_KEY", FERNET_KEY)
    with ExitStack() as stack:
        if work_dir is None:
            work_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-")))
        chaos = Chaos(eh, azurite, runs=runs, seed=seed, workers=workers, work_dir=work_dir,
                      variable_share=variable_share, spark_runs=spark_runs, tag=tag, partition_counts=partition_counts,
                      blob_groups=blob_groups)
        try:
            chaos.run()
        finally:
            chaos.kill_children()
            stop_fork_server()
        published = time.monotonic()
        figures = chaos.check()
    t = chaos.tally
    print(f"runs {t.runs} ({t.runs - t.spark_runs} local, {t.spark_runs} Spark, {t.spark_disrupted} of those disrupted) and "
          f"{t.backfill_batches} backfill batches in {t.attempts} attempts; disruptions {dict(t.disruptions)}")
    print(f"runs disrupted {t.disrupted} of {t.runs}; kills {t.kills} (SIGKILL observed), faults {t.faults} (fired), "
          f"pauses {t.pauses} (SIGSTOP observed; {t.long_pauses} resumed after a takeover); "
          f"final statuses {dict(t.statuses)}")
    for failure in t.failures[:5]:
        print(f"  a retry failed before succeeding: {failure[:300]}")
    print(f"read back {figures['read']} events for {figures['events']} expected: {figures['duplicates']} duplicates, "
          f"{figures['losses']} losses, {figures['unexpected']} unexpected, {figures['misplaced']} misplaced, "
          f"{figures['stamp_breaks']} eh.seq breaks; publishing {published - started:.0f}s, "
          f"check {time.monotonic() - published:.0f}s")
    return {"runs": t.runs, "disrupted": t.disrupted, "kills": t.kills, "faults": t.faults, "pauses": t.pauses,
            "long_pauses": t.long_pauses,
            "spark_runs": t.spark_runs, "spark_disrupted": t.spark_disrupted, "backfill": t.backfill_batches, **figures,
            "seconds": round(time.monotonic() - started)}


def main(argv: list[str] | None = None) -> int:
    """Run the chaos test and print its figures; the exit status is 1 when a hub holds a duplicate, a loss
    or an event out of place."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=8, help="runs in flight at once (most of them wait on leases)")
    parser.add_argument("--variable-share", type=float, default=0.3, help="share of runs on the Variables store")
    parser.add_argument("--spark-runs", type=int, default=4, help="runs through the Spark path (slow; 0 for none)")
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.ERROR)  # the SDK's notes on connections closed at shutdown are not findings
    from eventhubs_local import EmulatorProcess
    from eventhubs_local.azurite import AzuriteProcess

    with tempfile.TemporaryDirectory(prefix="bench-chaos-") as tmp:
        root = Path(tmp)
        if args.variable_share > 0:
            migrate_airflow_home(root / "airflow")
        with EmulatorProcess(root / "eh", extra_args=["--fsync", "never", "--log-level", "WARNING"]) as eh, \
                AzuriteProcess(root / "azurite") as azurite:
            (root / "work").mkdir()
            figures = run_chaos(eh, azurite, runs=args.runs, seed=args.seed, workers=args.workers,
                                variable_share=args.variable_share, spark_runs=args.spark_runs, work_dir=root / "work")
    bad = figures["duplicates"] or figures["losses"] or figures["unexpected"] or figures["misplaced"] or figures["stamp_breaks"]
    print(f"runs={figures['runs']} disrupted={figures['disrupted']} kills={figures['kills']} faults={figures['faults']} "
          f"pauses={figures['pauses']} "
          f"events={figures['events']} "
          f"duplicates={figures['duplicates']} losses={figures['losses']}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
