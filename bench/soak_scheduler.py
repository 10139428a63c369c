"""Soak through the scheduler: the daily DAG ``eh_daily_orders`` for many intervals under ``airflow standalone``;
do the endpoint's and the Airflow worker side's memory and open file descriptors stay flat?

``.venv/bin/python bench/soak_scheduler.py --intervals 50``

Starts its own local Event Hubs endpoint and Azurite in a temporary directory, creates a hub of 2
partitions with the ``analytics`` consumer group, and starts ``airflow standalone`` (API server,
scheduler, DAG processor, triggerer, LocalExecutor with 3 workers) on 127.0.0.1 with an Airflow
home, a port and a JWT secret of its own. The DAG's connections come in as ``AIRFLOW_CONN_*``
variables (``azure_event_hubs_default``, ``wasb_default``, ``spark_default``, and ``eh_example_db``,
a SQLite file). Scheduled runs are off, so the only runs are those of one
``airflow backfill create`` over ``--intervals`` consecutive days ending two days ago, one run at a
time, with ``rows`` kept small (``--rows``) so that a run's time goes into the pipeline machinery
(Spark generation, exactly-once publishing, the analytics load, the checkpoint sensor) rather than
into data volume.

Each time the REST API shows one more run finished, the script samples RSS (MiB) and open file
descriptors (psutil) of: the endpoint process; the LocalExecutor worker processes (the long-lived
processes that supervise each task; summed, and a change of their PIDs is reported); and the
triggerer (its main process and the trigger runner it starts, summed). A worker that supervises a
task holds the task's pipes, and the next run starts within seconds, so each worker's figures are
those of its last idle moment (its process title says ``<idle>``; polled every second). Task processes
and Spark's JVMs live for one task and are not sampled; the scheduler, the DAG processor and the API
server are sampled for the per-process report only. Growth is measured from the end of the warm-up
(``--warmup`` intervals) to the mean of the last five samples, for RSS as a percentage and for
descriptors as the last sample minus the one at the end of the warm-up. The report also says how often
a task deferred to the triggerer: the checkpoint sensor defers only when the analytics checkpoints are
not yet where it waits for them.

At the end every run must have succeeded; the hub is read back and each order event the runs
generated (the parquet files Spark wrote) must be in it exactly once, and the analytics table must
hold each of them once too. A failed run, a duplicate or a loss ends the script with an error.

Last line: ``intervals=… runs_ok=… duplicates=… losses=… endpoint_rss_growth_pct=… worker_rss_growth_pct=…
triggerer_rss_growth_pct=… endpoint_fd_growth=… worker_fd_growth=…`` (``duplicates`` and ``losses``
count order events in the hub: extra copies, and generated events missing from it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _sampling import growth, measure  # noqa: E402  (bench/, this script's folder)
from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.readback import read_hub  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402
from eventhubs_local.ports import free_port  # noqa: E402
from tests.support.stack import SCHEMA_GROUPS, example_env  # noqa: E402
from tests.support.standalone import AirflowStandalone, standalone_env  # noqa: E402
from tests.support.tls import make_certificates  # noqa: E402

DAG_ID = "eh_daily_orders"
HUB = "soak-orders"
PARTITIONS = 2
ANALYTICS_TABLE = "analytics_order_events"  # dags/_orders.py
WORKER_TITLE = "airflow worker -- LocalExecutor"  # the LocalExecutor's process title prefix for its workers
COMPONENT_NAMES: dict[int, str] = {}  # pid: name of the other Airflow components sampled


def airflow_env(home: Path, port: int, eh: EmulatorProcess, azurite: AzuriteProcess, db: Path, data_dir: Path,
                ca: Path) -> dict[str, str]:
    """The environment of ``airflow standalone`` and of the ``airflow`` CLI calls: the DAG's connections (the
    registry's CA ``ca``) and data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "EH_EXAMPLE_DATA_DIR"}
    env.update(example_env(db, data_dir, event_hubs=eh.connection_string(), blob=azurite.connection_string,
                           spark_master="local[2]", schema_registry=(eh.registry_namespace, ca)))
    env.update({
        "EH_EXAMPLE_NAMESPACE": f"{eh.host}:{eh.port}",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    })
    return standalone_env(home, port, env)


# -- the processes sampled ---------------------------------------------------------------------------------------


def title(proc: psutil.Process) -> str:
    """The process title (setproctitle rewrites cmdline) or the command line."""
    try:
        return " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def airflow_processes(root: psutil.Process) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """(LocalExecutor workers, triggerer processes) in the standalone's process tree.

    A worker has the executor's title and a parent that is not a worker (a task process starts as a fork
    of its worker, with the worker's title until it sets its own). The triggerer is the ``airflow triggerer``
    command and the processes under it (the trigger runner).
    """
    workers, triggerer = [], []
    for proc in root.children(recursive=True):
        text = title(proc)
        try:
            parent = proc.parent()
        except psutil.NoSuchProcess:
            continue
        if text.startswith(WORKER_TITLE) and parent is not None and not title(parent).startswith(WORKER_TITLE):
            workers.append(proc)
        elif "triggerer" in text.split()[:4] and parent is not None and parent.pid == root.pid:
            triggerer.append(proc)
            try:  # the trigger runner; not the log server (``airflow serve-logs``) it also starts
                triggerer.extend(p for p in proc.children(recursive=True) if "triggerer" in title(p).split()[:4])
            except psutil.NoSuchProcess:
                pass
    return workers, triggerer


def other_components(root: psutil.Process) -> dict[psutil.Process, str]:
    """The scheduler, the DAG processor and the API server (sampled for the per-process report only), and their names."""
    found = {}
    for proc in root.children():
        text = title(proc)
        for name in ("scheduler", "dag-processor", "api-server", "api_server"):
            if name in text.split()[:4] or text.startswith(f"airflow {name}"):
                found[proc] = name.replace("_", "-")
                break
    return found


@dataclass
class Sample:
    """Memory and open file descriptors of the endpoint and each Airflow process after one interval."""

    interval: int
    endpoint: tuple[float, int]
    workers: dict[int, tuple[float, int, bool]] = field(default_factory=dict)  # pid: (rss, fds, measured busy)
    triggerer: dict[int, tuple[float, int]] = field(default_factory=dict)
    others: dict[int, tuple[float, int]] = field(default_factory=dict)

    @property
    def busy(self) -> int:
        return sum(w[2] for w in self.workers.values())

    def rss(self, role: str) -> float:
        """Summed RSS (MiB) of ``"workers"`` or ``"triggerer"``."""
        return sum(figures[0] for figures in getattr(self, role).values())

    def fds(self, role: str) -> int:
        """Summed open descriptors of ``"workers"`` or ``"triggerer"``."""
        return sum(figures[1] for figures in getattr(self, role).values())


class IdleWorkers:
    """The last measurement of each LocalExecutor worker taken while it was idle, between two tasks.

    A worker supervising a task holds that task's pipes and sockets; the next run starts within seconds of
    the last one finishing, so a worker is often busy when a run finishes. ``observe`` is called every
    second; a measurement counts if the worker's title says ``<idle>`` before and after it.
    """

    def __init__(self) -> None:
        self.last: dict[int, tuple[float, int]] = {}

    def observe(self, root: psutil.Process) -> list[psutil.Process]:
        workers, _ = airflow_processes(root)
        for proc in workers:
            try:
                if "<idle>" in title(proc):
                    figures = measure(proc)
                    if "<idle>" in title(proc):
                        self.last[proc.pid] = figures
            except psutil.NoSuchProcess:
                pass
        return workers


def take_sample(interval: int, endpoint: psutil.Process, root: psutil.Process, idle: IdleWorkers) -> Sample:
    """Endpoint and triggerer as they are now; each worker as last seen idle (measured now if never seen idle)."""
    sample = Sample(interval, measure(endpoint))
    _, triggerer = airflow_processes(root)
    for proc in idle.observe(root):
        try:
            sample.workers[proc.pid] = (*idle.last[proc.pid], False) if proc.pid in idle.last else (*measure(proc), True)
        except psutil.NoSuchProcess:
            pass
    for proc in triggerer:
        try:
            sample.triggerer[proc.pid] = measure(proc)
        except psutil.NoSuchProcess:
            pass
    for proc, name in other_components(root).items():
        try:
            sample.others[proc.pid] = measure(proc)
            COMPONENT_NAMES[proc.pid] = name
        except psutil.NoSuchProcess:
            pass
    return sample


def describe(root: psutil.Process, endpoint: psutil.Process) -> list[str]:
    """One line per process sampled: pid and title."""
    workers, triggerer = airflow_processes(root)
    lines = [f"  endpoint   pid {endpoint.pid}: {title(endpoint)[:110]}"]
    lines += [f"  worker     pid {p.pid}: {title(p)[:110]}" for p in workers]
    lines += [f"  triggerer  pid {p.pid}: {title(p)[:110]}" for p in triggerer]
    lines += [f"  (report only) {name} pid {p.pid}: {title(p)[:90]}" for p, name in other_components(root).items()]
    return lines


# -- what the runs wrote -------------------------------------------------------------------------------------------


def order_event_keys(events: list[Any]) -> Counter:
    """How often each order event ``(order_id, step)`` is in the hub."""
    return Counter((e.properties["order_id"], int(e.properties["step"])) for e in events if "order_id" in e.properties)


def generated_keys(data_dir: Path, days: list[date]) -> Counter:
    """The order events ``(order_id, step)`` Spark wrote for ``days`` (parquet under ``orders/ds=<day>``)."""
    import pyarrow.parquet as pq

    return Counter(
        (row["order_id"], int(row["step"]))
        for day in days
        for row in pq.read_table(data_dir / "orders" / f"ds={day.isoformat()}", columns=["order_id", "step"]).to_pylist()
    )


def retried_and_deferred(home: Path) -> tuple[list[tuple[str, str, int, str]], int]:
    """Task instances that needed more than one try (run_id, task_id, try_number, state), and how often a task deferred."""
    conn = sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True)
    try:
        retried = conn.execute(
            "SELECT run_id, task_id, try_number, state FROM task_instance WHERE dag_id = ? AND try_number > 1 "
            "ORDER BY run_id, task_id", (DAG_ID,)
        ).fetchall()
        (deferred,) = conn.execute("SELECT count(*) FROM log WHERE dag_id = ? AND event = 'deferred'", (DAG_ID,)).fetchone()
    finally:
        conn.close()
    return retried, deferred


def log_problems(home: Path, standalone_log: Path) -> tuple[list[str], Counter]:
    """Error lines of the standalone's own output, and warnings or errors the tasks logged (Spark's stderr left out)."""
    errors = []
    for line in standalone_log.read_text(errors="replace").splitlines():
        if "[task.stderr]" in line:
            continue
        match = re.search(r"\[(error|critical)\s*\]\s*(.*)", line)
        if (match and match.group(2).strip()) or "Traceback" in line:
            errors.append(line.strip()[:300])
    warnings: Counter = Counter()
    for path in (home / "logs").glob(f"dag_id={DAG_ID}/**/*.log"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("level") in ("warning", "error", "critical") and record.get("logger") != "task.stderr":
                warnings[f"{record.get('level')} {record.get('logger')}: {str(record.get('event'))[:200]}"] += 1
    return errors, warnings


def task_log_tail(home: Path, run_id: str, task_id: str, chars: int = 3000) -> str:
    """The end of the newest log of one task of a run, for a failure report."""
    logs = sorted((home / "logs").glob(f"dag_id={DAG_ID}/run_id={run_id}/task_id={task_id}/**/*.log"),
                  key=lambda p: p.stat().st_mtime)
    return f"{logs[-1]}:\n{logs[-1].read_text(errors='replace')[-chars:]}" if logs else "(no task log found)"


def fail_run(airflow: AirflowStandalone, home: Path, run: dict[str, Any]) -> None:
    """Stop the soak with a report of a run that did not succeed: its tasks, failed tasks' logs and Airflow's log."""
    lines = [f"run {run['dag_run_id']} (interval {run['data_interval_start'][:10]}) ended {run['state']}"]
    try:
        for ti in airflow.task_instances(DAG_ID, run["dag_run_id"]):
            lines.append(f"  {ti['task_id']}: {ti['state']} (try {ti.get('try_number')})")
            if ti["state"] == "failed":
                lines.append(task_log_tail(home, run["dag_run_id"], ti["task_id"]))
    except httpx.HTTPError as exc:
        lines.append(f"  (task instances not readable: {exc})")
    lines.append(f"standalone log tail:\n{airflow.tail()}")
    raise SystemExit("\n".join(lines))


# -- the soak ------------------------------------------------------------------------------------------------------


def main() -> int:
    """Backfill the daily DAG interval after interval under ``airflow standalone`` and report the growth."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--intervals", type=int, default=50, help="days backfilled, one DAG run each")
    parser.add_argument("--warmup", type=int, default=10, help="intervals before growth is measured")
    parser.add_argument("--rows", type=int, default=30, help="orders per interval (each is 2 or 3 events)")
    parser.add_argument("--run-timeout", type=float, default=1200, help="seconds one run may take before the soak gives up")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, Airflow home, data)")
    args = parser.parse_args()
    if args.warmup < 1 or args.intervals < args.warmup + 5:
        parser.error("--warmup must be at least 1 and --intervals at least --warmup + 5")
    if not 1 <= args.rows <= 100_000:
        parser.error("--rows must be between 1 and 100000 (the DAG's param)")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what was started (the finally blocks) on SIGTERM too
    started = time.monotonic()
    last_day = datetime.now(UTC).date() - timedelta(days=2)  # a backfill runs intervals that have ended
    days = [last_day - timedelta(days=args.intervals - 1 - k) for k in range(args.intervals)]
    tmp = tempfile.mkdtemp(prefix="bench-soak-scheduler-")
    root = Path(tmp)
    home, data_dir, db = root / "airflow-home", root / "data", root / "example.db"
    home.mkdir()
    samples: list[Sample] = []
    worker_sets: list[tuple[int, frozenset[int]]] = []
    print(f"soak of {DAG_ID}: {args.intervals} intervals {days[0]} .. {days[-1]}, {args.rows} orders each, "
          f"warm-up {args.warmup}; work dir {root}", flush=True)
    try:
        tls = make_certificates(root / "tls")  # the Schema Registry's: the pipeline publishes Avro
        with EmulatorProcess(root / "eh", hubs={HUB: PARTITIONS}, consumer_groups={HUB: ["analytics"]},
                             extra_args=["--log-level", "WARNING"], registry_port=0, tls=(tls.cert, tls.key),
                             schema_groups=SCHEMA_GROUPS) as eh, \
                AzuriteProcess(root / "azurite") as azurite:
            endpoint_proc = psutil.Process(eh.pid)
            port = free_port()
            env = airflow_env(home, port, eh, azurite, db, data_dir, tls.ca)
            airflow = AirflowStandalone(env, port, root / "standalone.log")
            try:
                airflow.start()
                airflow.wait_for_dag(DAG_ID)
                standalone_proc = psutil.Process(airflow.proc.pid)
                print(f"airflow standalone up on 127.0.0.1:{port}, {DAG_ID} parsed ({time.monotonic() - started:.0f}s)",
                      flush=True)
                conf = {"hub": HUB, "rows": args.rows}
                backfill = subprocess.run(
                    [sys.executable, "-m", "airflow", "backfill", "create", "--dag-id", DAG_ID,
                     "--from-date", days[0].isoformat(), "--to-date", days[-1].isoformat(),
                     "--max-active-runs", "1", "--dag-run-conf", json.dumps(conf)],
                    env=env, capture_output=True, text=True, timeout=600, cwd=root,
                )
                if backfill.returncode != 0:
                    raise SystemExit(f"airflow backfill create failed ({backfill.returncode}):\n"
                                     f"{backfill.stdout[-3000:]}\n{backfill.stderr[-3000:]}")
                backfill_started = time.monotonic()
                print(f"backfill created ({backfill_started - started:.0f}s)", flush=True)

                described = False
                idle = IdleWorkers()
                finished: list[dict[str, Any]] = []
                last_progress = time.monotonic()
                while len(finished) < args.intervals:
                    airflow.check_alive()
                    runs = airflow.runs(DAG_ID)
                    for run in runs:
                        if run["state"] == "failed":
                            fail_run(airflow, home, run)
                    done = sorted((r for r in runs if r["state"] == "success"), key=lambda r: r["data_interval_start"])
                    if len(done) > len(finished):
                        sample = take_sample(len(done), endpoint_proc, standalone_proc, idle)
                        if not described:
                            print("processes sampled:", *describe(standalone_proc, endpoint_proc), sep="\n", flush=True)
                            described = True
                        pids = frozenset(sample.workers)
                        if worker_sets and worker_sets[-1][1] != pids:
                            print(f"  note: LocalExecutor worker pids changed at interval {len(done)}: "
                                  f"{sorted(worker_sets[-1][1])} -> {sorted(pids)}", flush=True)
                        if not worker_sets or worker_sets[-1][1] != pids:
                            worker_sets.append((len(done), pids))
                        for k in range(len(finished) + 1, len(done) + 1):  # one sample per finished run
                            samples.append(sample if k == len(done) else replace(sample, interval=k))
                            if k % 5 == 0 or k == args.intervals:
                                print(f"  interval {k}: endpoint {sample.endpoint[0]:.0f} MiB {sample.endpoint[1]} fds, "
                                      f"workers {sample.rss('workers'):.0f} MiB {sample.fds('workers')} fds "
                                      f"({len(sample.workers)}, {sample.busy} never seen idle), "
                                      f"triggerer {sample.rss('triggerer'):.0f} MiB {sample.fds('triggerer')} fds "
                                      f"({time.monotonic() - started:.0f}s)", flush=True)
                        finished = done
                        last_progress = time.monotonic()
                    else:
                        idle.observe(standalone_proc)
                    if time.monotonic() - last_progress > args.run_timeout:
                        states = Counter(r["state"] for r in runs)
                        raise SystemExit(f"no run finished in {args.run_timeout:.0f} s ({len(finished)} done; run states "
                                         f"{dict(states)}):\n{airflow.tail()}")
                    time.sleep(1)
                soak_seconds = time.monotonic() - backfill_started
                run_days = [r["data_interval_start"][:10] for r in finished]
                if run_days != [d.isoformat() for d in days]:
                    raise SystemExit(f"the runs' intervals are not the backfilled days: {run_days}")
                durations = [
                    (datetime.fromisoformat(r["end_date"]) - datetime.fromisoformat(r["start_date"])).total_seconds()
                    for r in finished
                ]
                retried, deferred = retried_and_deferred(home)
                standalone_errors, task_warnings = log_problems(home, airflow.log)
            finally:
                airflow.stop()

            # -- exactly once: the hub against what Spark generated, and the analytics table --
            generated = generated_keys(data_dir, days)
            in_hub = order_event_keys(read_hub(EventHubsEndpoint.from_connection_string(eh.connection_string(HUB))))
            for thread in threading.enumerate():  # the readers' links are detached in the background
                if thread.name.startswith("eh-ingest-close-"):
                    thread.join(timeout=15)
            duplicates = sum(n - 1 for n in in_hub.values() if n > 1)
            losses = sum(1 for key in generated if key not in in_hub)
            strangers = sum(n for key, n in in_hub.items() if key not in generated)
            with sqlite3.connect(db) as conn:
                rows, distinct = conn.execute(
                    f"SELECT count(*), count(DISTINCT order_id || '/' || step) FROM {ANALYTICS_TABLE}").fetchone()
                loaded = {(o, int(s)) for o, s in conn.execute(f"SELECT order_id, step FROM {ANALYTICS_TABLE}")}
            not_loaded = sum(1 for key in generated if key not in loaded)
    finally:
        if args.keep:
            print(f"work dir kept: {root}")
        else:
            import shutil

            shutil.rmtree(root, ignore_errors=True)

    w = args.warmup
    endpoint_rss = [s.endpoint[0] for s in samples]
    endpoint_fds = [s.endpoint[1] for s in samples]
    worker_rss = [s.rss("workers") for s in samples]
    worker_fds = [s.fds("workers") for s in samples]
    triggerer_rss = [s.rss("triggerer") for s in samples]
    triggerer_fds = [s.fds("triggerer") for s in samples]
    figures = {
        "intervals": args.intervals,
        "runs_ok": len(finished),
        "duplicates": duplicates,
        "losses": losses,
        "endpoint_rss_growth_pct": round(growth(endpoint_rss, w), 1),
        "worker_rss_growth_pct": round(growth(worker_rss, w), 1),
        "triggerer_rss_growth_pct": round(growth(triggerer_rss, w), 1),
        "endpoint_fd_growth": endpoint_fds[-1] - endpoint_fds[w - 1],
        "worker_fd_growth": worker_fds[-1] - worker_fds[w - 1],
    }

    print(f"per-process after the warm-up (interval {w} -> mean of the last five; fds interval {w} -> {args.intervals}):")
    for name, series in (("endpoint", [{endpoint_proc.pid: s.endpoint} for s in samples]),
                         ("worker", [{pid: v[:2] for pid, v in s.workers.items()} for s in samples]),
                         ("triggerer", [dict(s.triggerer) for s in samples]),
                         *((COMPONENT_NAMES[pid], [{pid: s.others[pid]} if pid in s.others else {} for s in samples])
                           for pid in sorted(COMPONENT_NAMES))):
        for pid in sorted({pid for s in series for pid in s}):
            rss = [s.get(pid, (0.0, 0))[0] for s in series]
            fds = [s.get(pid, (0.0, 0))[1] for s in series]
            if rss[w - 1] and all(rss[-5:]):
                print(f"  {name:13} pid {pid}: {rss[w - 1]:.1f} -> {sum(rss[-5:]) / 5:.1f} MiB "
                      f"({growth(rss, w):+.1f}%), {fds[w - 1]} -> {fds[-1]} fds")
            else:
                print(f"  {name:13} pid {pid}: not present from the warm-up to the end (present in "
                      f"{sum(1 for r in rss if r)} of {len(rss)} samples)")
    if len(worker_sets) > 1:
        print(f"  the LocalExecutor worker pids changed {len(worker_sets) - 1} time(s); the worker figures are sums "
              f"over the workers present at each sample")
    print(f"runs: {len(finished)} of {args.intervals} succeeded; run time median {sorted(durations)[len(durations) // 2]:.0f}s, "
          f"max {max(durations):.0f}s; task instances retried: {len(retried)}; tasks deferred to the triggerer: {deferred}; "
          f"samples with a worker never yet seen idle: {sum(1 for s in samples if s.busy)}"
          + "".join(f"\n  retried: {r}" for r in retried[:10]))
    if standalone_errors:
        print(f"standalone log: {len(standalone_errors)} error line(s), e.g.:", *standalone_errors[:5], sep="\n  ")
    if task_warnings:
        print(f"task logs: {sum(task_warnings.values())} warning or error record(s) (Spark's stderr aside):",
              *(f"{n} x {text}" for text, n in task_warnings.most_common(8)), sep="\n  ")
    print(f"hub {HUB}: {sum(generated.values())} order events generated, {sum(in_hub.values())} in the hub "
          f"({len(in_hub)} distinct), {duplicates} duplicates, {losses} lost, {strangers} not generated by these runs; "
          f"{ANALYTICS_TABLE}: {rows} rows ({distinct} distinct), {not_loaded} generated events not loaded")
    acceptance = (all(figures[k] < 10 for k in ("endpoint_rss_growth_pct", "worker_rss_growth_pct",
                                                     "triggerer_rss_growth_pct"))
                  and figures["endpoint_fd_growth"] <= 0 and figures["worker_fd_growth"] <= 0
                  and triggerer_fds[-1] <= triggerer_fds[w - 1])
    print(f"{args.intervals} intervals of {args.rows} orders through airflow standalone (backfill, one run at a time) in "
          f"{soak_seconds:.0f}s ({time.monotonic() - started:.0f}s in all); after {w} warm-up intervals: "
          f"endpoint {endpoint_rss[w - 1]:.0f} -> {endpoint_rss[-1]:.0f} MiB, {endpoint_fds[w - 1]} -> {endpoint_fds[-1]} fds; "
          f"workers {worker_rss[w - 1]:.0f} -> {worker_rss[-1]:.0f} MiB, {worker_fds[w - 1]} -> {worker_fds[-1]} fds; "
          f"triggerer {triggerer_rss[w - 1]:.0f} -> {triggerer_rss[-1]:.0f} MiB, {triggerer_fds[w - 1]} -> "
          f"{triggerer_fds[-1]} fds; growth below 10% and no descriptor growth: {'yes' if acceptance else 'NO'}")
    if max(generated.values(), default=0) > 1:
        print(f"the generated parquet holds {sum(n - 1 for n in generated.values() if n > 1)} repeated order events")
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    if duplicates or losses or strangers or rows != distinct or not_loaded or len(finished) != args.intervals:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
