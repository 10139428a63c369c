"""Soak of the deployment as production runs it: hundreds of DAG runs on Postgres metadata and the
CeleryExecutor while workers, the scheduler and the triggerer are killed or restarted; does each
service's memory stay flat, and is every event published exactly once?

``.venv/bin/python bench/soak_deployment.py --runs 200``

Builds the provider's wheel and installs it into a virtual environment in a temporary directory
(:func:`tests.support.deployment.install`; its third-party packages are this
environment's, as in the deployment test, or a full install of the pinned versions with
``--full-install``, as ``make deployment`` does), then starts
:class:`~tests.support.deployment.Deployment` with a Postgres server of its own (Debian's
``postgresql`` binaries) and ``redis-server``: api-server, scheduler, dag-processor, triggerer, two
Celery workers, the local Event Hubs endpoint and Azurite (and whatever else the deployment runs),
each a process group of its own. The DAGs
are the deployment test's two publish DAGs (``tests/system/deployment_dags/eh_deployment_publish.py``,
``eh_deployment_publish_blob`` and ``eh_deployment_publish_variable``, one per state backend). Each
gets a hub of 2 partitions and one ``airflow backfill create --max-active-runs 1`` over ``--runs``/2
consecutive days from 2025-01-01, ``--rows`` orders a day, so the two DAGs run side by side, one run
of each at a time.

Faults, counted by completed runs (none once the last run has finished): every ``--kill-every``
runs a Celery worker is SIGKILLed with its whole process group and started again: a worker running a
publish task at that moment (a task process, ``airflow worker -- <task instance id>``, in its process
tree, the task instance running in the REST API), the one whose turn it is (they alternate) if both
are; when neither is, the first that starts one within ``--busy-wait`` seconds, else the one whose
turn it is. Every ``--restart-every`` runs the scheduler is SIGKILLed and started again, and the
triggerer restarted (SIGTERM). The deployment's settings bound what a lost process's work
waits (a running task's heartbeat 30 s, a queued task 90 s, a dead scheduler's tasks adopted after
30 s); the DAGs retry a task twice.

Each time the REST API (polled every ``--poll`` seconds) shows more runs finished, the script samples
RSS and PSS (MiB) and open file descriptors (psutil) of every service, each summed over its process
tree: a Celery worker's main process, log server and pool processes (a pool process supervises the
tasks it runs), the triggerer and its trigger runner and log server, Postgres's server and its
backends. Left out are the processes that live for one unit of work: a worker's task processes (each
in a process group of its own) and the dag-processor's DAG-file parsing processes (its children).
PSS divides a page among the processes that map it: Postgres's backends each count in their RSS the
shared buffers they have touched, and a process forked from another (a worker's pool process, the
triggerer's trigger runner) shares its parent's pages until either writes to them, so a service's
PSS rises over the first minute after its start while its RSS does not. A killed or
restarted service starts a new series: each service is measured over its last uninterrupted stretch
only, from the end of the warm-up (``--warmup`` runs) or, for a service (re)started later,
``--restart-warmup`` runs after its start, to the mean of its last five samples. Where that window
holds fewer than five samples (a short run), the whole stretch is used and the table says so; a
restarted service's stretch begins once it runs as many processes as at its last sample (a worker's
pool started, the triggerer's trigger runner).

Beside them, ``--pipeline-days`` days (14 by default; 0: none) of the example pipeline
``eh_daily_orders`` (Spark on the deployment's Spark cluster writes a day's orders, Spark publishes
them, the ``analytics`` group loads them into SQLite, the deferrable sensor waits for its
checkpoints) are backfilled at once, ``--pipeline-rows`` orders a day, the days ending two days
before today, to a hub of their own: its tasks run on the same workers under the same kills (a
worker is killed while it runs any task). Once they are done, the hub and the SQL table must hold
each event the Spark jobs generated exactly once, and the same backfill with ``--reprocess-behavior
completed`` must add nothing to either (``pipeline_duplicates``, ``pipeline_losses``,
``pipeline_added_by_reprocessing``).

All along, the event-driven example ``eh_on_new_orders`` watches the ``orders-live`` hub (unpaused at
the start, its safety run on ``--safety-schedule``): ``--burst-orders`` orders (3 events each) go to
that hub every ``--burst-every`` seconds until the last run has finished, and the ``live_order_events``
table of the example's SQLite database is read every second. Once every event is in it (or
``--watch-timeout`` seconds after the last burst), each event's delay from its acknowledged send to
its first sight in the table gives ``watcher_max_s`` and ``watcher_p95_s``; ``watcher_duplicates``
counts extra copies in the table, ``watcher_losses`` events never in it.

At the end every run must have succeeded (a failed run stops the soak with its task log's tail), and
each hub is read back: every order of its days exactly once (``duplicates`` counts extra copies,
``losses`` missing orders). The per-service table gives the window's first and last RSS (the mean of
the last five samples), the growth of RSS and of PSS, descriptors and processes at the window's start
and end, the window, and after which runs the service was restarted. Components beyond the ten named
below (the Spark cluster of a deployment that runs one) are in the table only.

Last line: ``runs=… runs_ok=… kills=… kills_mid_task=… scheduler_kills=… triggerer_restarts=… duplicates=… losses=…
retried=… pipeline_runs_ok=… pipeline_events=… pipeline_duplicates=… pipeline_losses=…
pipeline_added_by_reprocessing=… watcher_events=… watcher_max_s=… watcher_p95_s=… watcher_duplicates=… watcher_losses=…
api_server_rss_growth_pct=… scheduler_rss_growth_pct=… dag_processor_rss_growth_pct=…
triggerer_rss_growth_pct=… worker_rss_growth_pct=… event_hubs_rss_growth_pct=… azurite_rss_growth_pct=…
redis_rss_growth_pct=… postgres_rss_growth_pct=… seconds=…`` (``worker_rss_growth_pct``: the larger of the
two workers'; ``retried``: task instances that needed more than one try).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import sysconfig
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.readback import read_hub  # noqa: E402
from tests.support.delivery_times import (  # noqa: E402
    Bursts,
    SinkSampler,
    delivery_times,
    percentile,
    sink_counts,
    wait_for_receivers,
)
from tests.support.deployment import WORKERS, Deployment, build_wheel, install  # noqa: E402
from tests.support.standalone import AirflowApi, StandaloneError  # noqa: E402

DAG_FILE = REPO / "tests" / "system" / "deployment_dags" / "eh_deployment_publish.py"
BACKENDS = ("blob", "variable")
PARTITIONS = 2
FIRST_DAY = date(2025, 1, 1)
WATCHED_HUB, WATCHER_GROUP, WATCHER_DAG = "orders-live", "airflow-watcher", "eh_on_new_orders"  # deployment.HUBS
PIPELINE_DAG, PIPELINE_HUB = "eh_daily_orders", "soak-pipeline"
SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer", "worker-1", "worker-2", "event-hubs", "azurite",
            "redis", "postgres")


def dag_id(backend: str) -> str:
    """The publish DAG of state backend ``backend``."""
    return f"eh_deployment_publish_{backend}"


# -- the processes sampled ---------------------------------------------------------------------------------------


def title(proc: psutil.Process) -> str:
    """The process title (setproctitle rewrites cmdline) or the command line."""
    try:
        return " ".join(proc.cmdline()).strip()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def resident(name: str, leader: psutil.Process) -> list[psutil.Process]:
    """The long-lived processes of service ``name``: its leader and its descendants, less zombies and the
    processes that live for one unit of work: a worker's task processes (in process groups of their own)
    and the dag-processor's DAG-file parsing processes (its children; it has no long-lived ones)."""
    if name == "dag-processor":
        return [leader]
    group = os.getpgid(leader.pid)
    procs = [leader]
    for proc in leader.children(recursive=True):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE or (name in WORKERS and os.getpgid(proc.pid) != group):
                continue
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
        procs.append(proc)
    return procs


@dataclass(frozen=True)
class Figures:
    """One service at one sample: its leader's pid, summed RSS and PSS (MiB) and descriptors, how many processes."""

    pid: int
    rss: float
    pss: float
    fds: int
    procs: int


def measure(name: str, pid: int) -> Figures | None:
    """Service ``name`` (leader ``pid``) now, or ``None`` when its leader is gone."""
    try:
        leader = psutil.Process(pid)
        procs = resident(name, leader)
    except (psutil.NoSuchProcess, ProcessLookupError):
        return None
    rss, pss, fds, count = 0.0, 0.0, 0, 0
    for proc in procs:
        try:
            with proc.oneshot():
                memory = proc.memory_full_info()
                rss, pss = rss + memory.rss / 2**20, pss + memory.pss / 2**20
                fds += proc.num_fds()
            count += 1
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            if proc.pid == pid:
                return None
    return Figures(pid, rss, pss, fds, count)


@dataclass
class Sample:
    """Every service's figures after ``run`` runs had finished."""

    run: int
    services: dict[str, Figures | None]


def services(deployment: Deployment) -> list[str]:
    """The services sampled: :data:`SERVICES`, then any other component the deployment runs (in the table only)."""
    return [*SERVICES, *(name for name in deployment.components if name not in SERVICES)]


def take_sample(deployment: Deployment, run: int) -> Sample:
    """Every service's figures now, labelled with ``run`` finished runs."""
    return Sample(run, {name: measure(name, pid) if (pid := deployment.components[name].pid) else None
                        for name in services(deployment)})


def describe(deployment: Deployment) -> list[str]:
    """One line per service: its leader and the processes sampled with it."""
    lines = []
    for name in services(deployment):
        pid = deployment.components[name].pid
        assert pid is not None
        try:
            procs = resident(name, psutil.Process(pid))
        except (psutil.NoSuchProcess, ProcessLookupError):
            lines.append(f"  {name:13} pid {pid}: gone")
            continue
        titles = "; ".join(f"{p.pid} {title(p)[:60]}" for p in procs[:6]) + (" ..." if len(procs) > 6 else "")
        lines.append(f"  {name:13} {len(procs)} process(es): {titles}")
    return lines


def busy_workers(deployment: Deployment, api: AirflowApi) -> dict[str, tuple[str, str, int]]:
    """The workers running a task now: worker name -> (dag_id, run_id, try) of the task instance its task
    process runs, where the REST API shows that task instance running."""
    running = api.get("/dags/~/dagRuns/~/taskInstances", state="running", limit=100)
    running.raise_for_status()
    found = {}
    for ti in running.json()["task_instances"]:
        worker = deployment.worker_running(ti["id"])
        if worker is not None and worker not in found:
            found[worker] = (ti["dag_id"], ti["dag_run_id"], ti["try_number"])
    return found


# -- growth over each service's last uninterrupted stretch ----------------------------------------------------


@dataclass
class Window:
    """The samples a service's growth is measured over, and what it gives."""

    name: str
    first_run: int
    last_run: int
    samples: int
    start_rss: float
    end_rss: float
    growth: float
    pss_growth: float
    start_fds: int
    end_fds: int
    start_procs: int
    end_procs: int
    short: bool
    restarts: list[int] = field(default_factory=list)


def window(name: str, samples: list[Sample], warmup: int, restart_warmup: int, restarts: list[int]) -> Window | None:
    """Service ``name``'s growth from the end of the warm-up (or ``restart_warmup`` runs after its last
    (re)start) to the mean of its last five samples, over the samples of its current process only."""
    last = next((s.services[name] for s in reversed(samples) if s.services[name] is not None), None)
    if last is None:
        return None
    stretch = []
    for sample in reversed(samples):  # the trailing samples of the current leader
        figures = sample.services[name]
        if figures is None or figures.pid != last.pid:
            break
        stretch.append((sample.run, figures))
    stretch.reverse()
    if restarts:  # a restarted service counts once it runs all its processes (as many as at its last sample)
        stretch = stretch[next(k for k, (_, f) in enumerate(stretch) if f.procs >= last.procs):]
    start = max(warmup, restarts[-1] + restart_warmup) if restarts else warmup
    measured = [(run, f) for run, f in stretch if run >= start]
    short = len(measured) < 5
    if short:
        measured = stretch
    base, tail = measured[0][1], [f for _, f in measured[-5:]]
    end, end_pss = sum(f.rss for f in tail) / len(tail), sum(f.pss for f in tail) / len(tail)
    (first, _), (last_run, final) = measured[0], measured[-1]
    return Window(name, first, last_run, len(measured), base.rss, end, (end - base.rss) / base.rss * 100,
                  (end_pss - base.pss) / base.pss * 100, base.fds, final.fds, base.procs, final.procs, short, restarts)


def table(windows: list[Window]) -> list[str]:
    """The per-service table: RSS at the window's start and end, its growth and PSS's, descriptors, processes,
    the window and the restarts."""
    lines = [f"{'service':13} {'start MiB':>9} {'end MiB':>8} {'growth':>7} {'PSS':>7} {'fds':>11} {'procs':>7}  "
             f"{'window (runs, samples)':24} restarted after run"]
    for w in windows:
        span = f"{w.first_run}..{w.last_run} ({w.samples})"
        restarts = ", ".join(str(r) for r in w.restarts) or "-"
        note = " (short: the whole stretch)" if w.short else ""
        lines.append(f"{w.name:13} {w.start_rss:9.1f} {w.end_rss:8.1f} {w.growth:+6.1f}% {w.pss_growth:+6.1f}% "
                     f"{w.start_fds:>5}->{w.end_fds:<5} {w.start_procs:>3}->{w.end_procs:<3}  {span:24} {restarts}{note}")
    return lines


# -- the soak ------------------------------------------------------------------------------------------------------


@dataclass
class Faults:
    """What was killed or restarted, and after how many finished runs."""

    kills: int = 0
    kills_mid_task: int = 0
    scheduler_kills: int = 0
    triggerer_restarts: int = 0
    restarts: dict[str, list[int]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def note(self, line: str) -> None:
        self.log.append(line)
        print(f"  {line}", flush=True)


def kill_worker(deployment: Deployment, faults: Faults, done: int, name: str, task: tuple[str, str, int] | None) -> None:
    """SIGKILL worker ``name`` (its process group and every process under it), start it again, count it."""
    deployment.kill(name)
    deployment.restart(name)
    faults.kills += 1
    faults.kills_mid_task += task is not None
    faults.restarts.setdefault(name, []).append(done)
    what = f"running {task[0]} {task[1]} (try {task[2]})" if task else "idle: no task started in time"
    faults.note(f"run {done}: SIGKILL {name} {what}; started again")


def kill_scheduler(deployment: Deployment, faults: Faults, done: int) -> None:
    """SIGKILL the scheduler and start it again, restart the triggerer (SIGTERM), count both."""
    deployment.kill("scheduler")
    deployment.restart("scheduler")
    deployment.restart("triggerer")
    faults.scheduler_kills += 1
    faults.triggerer_restarts += 1
    for name in ("scheduler", "triggerer"):
        faults.restarts.setdefault(name, []).append(done)
    faults.note(f"run {done}: SIGKILL scheduler, started again; triggerer restarted")


def fail_runs(api: AirflowApi, runs: dict[str, list[dict[str, Any]]]) -> None:
    """Stop the soak when a run failed: which, and its failed tasks' logs."""
    for backend, backend_runs in runs.items():
        failed = [r["dag_run_id"] for r in backend_runs if r["state"] == "failed"]
        if failed:
            raise SystemExit(f"{dag_id(backend)}: run(s) failed: {failed}\n{api.failure_report(dag_id(backend), failed)}\n"
                             f"the scheduler's log:\n{api.tail(2000)}")


def where_tasks_are(api: AirflowApi, runs: dict[str, list[dict[str, Any]]]) -> str:
    """A line per task instance of the unfinished runs."""
    return "\n".join(api.where_tasks_are(dag_id(backend), [r for r in backend_runs if r["state"] != "success"])
                     for backend, backend_runs in runs.items())


def expected_orders(days: list[date], rows: int) -> Counter:
    """Each order the DAG publishes for ``days`` (``eh_deployment_publish.day_orders``), once."""
    return Counter(f"{day:%Y%m%d}-{n:05d}" for day in days for n in range(rows))


def pipeline_backfill(deployment: Deployment, days: list[date], rows: int, *more: str) -> None:
    """``airflow backfill create`` of the example pipeline over ``days``, one run at a time, to :data:`PIPELINE_HUB`."""
    created = deployment.airflow(
        "backfill", "create", "--dag-id", PIPELINE_DAG, "--from-date", days[0].isoformat(), "--to-date",
        days[-1].isoformat(), "--dag-run-conf", json.dumps({"hub": PIPELINE_HUB, "rows": rows}), "--max-active-runs", "1",
        *more,
    )
    if created.returncode != 0:
        raise SystemExit(f"airflow backfill create of {PIPELINE_DAG} failed ({created.returncode}):\n"
                         f"{created.stdout[-2000:]}\n{created.stderr[-3000:]}")


def pipeline_counts(deployment: Deployment, days: list[date]) -> tuple[Counter, Counter, Counter]:
    """The pipeline's order events ``(order_id, step)``: as the Spark jobs generated them for ``days``,
    in its hub, and in the SQLite table of the analytics group."""
    import sqlite3

    import pyarrow.parquet as pq

    generated: Counter = Counter()
    for day in days:
        rows = pq.read_table(deployment.root / "data" / "orders" / f"ds={day.isoformat()}").to_pylist()
        generated.update((row["order_id"], row["step"]) for row in rows)
    endpoint = EventHubsEndpoint.from_connection_string(deployment.event_hubs_connection_string(), PIPELINE_HUB)
    in_hub = Counter((e.properties["order_id"], int(e.properties["step"])) for e in read_hub(endpoint))
    with sqlite3.connect(deployment.root / "example.db", timeout=30) as conn:
        in_table = Counter(conn.execute("SELECT order_id, step FROM analytics_order_events").fetchall())
    return generated, in_hub, in_table


def soak(args: argparse.Namespace, root: Path, started: float) -> int:
    """Install, start the deployment, backfill, fault and sample until every run finished, check the hubs, report."""
    days = [FIRST_DAY + timedelta(days=k) for k in range(args.runs // 2)]
    print(f"building the wheel and installing it into {root / 'venv'} ({'full install' if args.full_install else 'shared'})",
          flush=True)
    wheel = build_wheel(root / "wheel")
    share = None if args.full_install else Path(sysconfig.get_path("purelib"))
    where = install(root / "venv", wheel, share=share)
    print(f"the deployment imports the provider from {where} ({time.monotonic() - started:.0f}s)", flush=True)
    deployment = Deployment(root / "deployment", root / "venv", dag_files=[DAG_FILE],
                            settings={"EH_EXAMPLE_SAFETY_SCHEDULE": args.safety_schedule})
    samples: list[Sample] = []
    faults = Faults()
    bursts: Bursts | None = None
    sampler: SinkSampler | None = None
    try:
        deployment.start()
        api = deployment.api_client()
        print(f"deployment up at {deployment.url}, logs in {deployment.root / 'logs'} ({time.monotonic() - started:.0f}s)",
              flush=True)
        hubs = {backend: f"soak-{backend}" for backend in BACKENDS}
        for hub in hubs.values():
            deployment.event_hubs_admin().create_hub(hub, partitions=PARTITIONS)
        for backend in BACKENDS:
            api.wait_for_dag(dag_id(backend), timeout=300)
        api.wait_for_dag(WATCHER_DAG, timeout=300)
        api.wait_for_dag(PIPELINE_DAG, timeout=300)
        api.unpause(*(dag_id(backend) for backend in BACKENDS), WATCHER_DAG)  # paused when first parsed, by Airflow's default
        wait_for_receivers(deployment.event_hubs_admin(), WATCHED_HUB, WATCHER_GROUP, 2, alive=api.check_alive)
        live = EventHubsEndpoint.from_connection_string(deployment.event_hubs_connection_string(), WATCHED_HUB)
        bursts = Bursts(live, orders=args.burst_orders, every=args.burst_every)
        sampler = SinkSampler(deployment.root / "example.db", every=1.0)
        bursts.start()
        sampler.start()
        for backend in BACKENDS:
            created = deployment.airflow(
                "backfill", "create", "--dag-id", dag_id(backend), "--from-date", days[0].isoformat(),
                "--to-date", days[-1].isoformat(), "--dag-run-conf", json.dumps({"hub": hubs[backend], "rows": args.rows}),
                "--max-active-runs", "1",
            )
            if created.returncode != 0:
                raise SystemExit(f"airflow backfill create of {dag_id(backend)} failed ({created.returncode}):\n"
                                 f"{created.stdout[-2000:]}\n{created.stderr[-3000:]}")
        pipeline_days = [date.today() - timedelta(days=args.pipeline_days + 1 - k) for k in range(args.pipeline_days)]
        if pipeline_days:
            deployment.event_hubs_admin().create_hub(PIPELINE_HUB, partitions=PARTITIONS, consumer_groups=["analytics"])
            api.unpause(PIPELINE_DAG)  # it starts tomorrow (EH_EXAMPLE_START_DATE): no catch-up, only the backfill
            pipeline_backfill(deployment, pipeline_days, args.pipeline_rows)
            print(f"backfill created: {len(pipeline_days)} days {pipeline_days[0]} .. {pipeline_days[-1]} of {PIPELINE_DAG}, "
                  f"{args.pipeline_rows} orders a day", flush=True)
        backfilled = time.monotonic()
        print(f"backfills created: {len(days)} days {days[0]} .. {days[-1]} on each DAG, {args.rows} orders a day "
              f"({backfilled - started:.0f}s)", flush=True)

        next_kill, next_restart = args.kill_every, args.restart_every
        kill_pending_since: float | None = None
        turn = 0
        last_progress = time.monotonic()
        done = 0
        runs: dict[str, list[dict[str, Any]]] = {}
        while True:
            api.check_alive()
            runs = {backend: api.runs(dag_id(backend)) for backend in BACKENDS}
            fail_runs(api, runs)
            now_done = sum(1 for rs in runs.values() for r in rs if r["state"] == "success")
            if now_done > done:
                sample = take_sample(deployment, now_done)
                if not samples:
                    print("processes sampled (first sample):", *describe(deployment), sep="\n", flush=True)
                for k in range(done + 1, now_done + 1):  # one sample per finished run
                    samples.append(Sample(k, sample.services))
                    if k % 10 == 0 or k == args.runs:
                        shown = ", ".join(f"{n} {f.rss:.0f}" if (f := sample.services[n]) else f"{n} -" for n in SERVICES)
                        print(f"  run {k}: MiB {shown} ({time.monotonic() - started:.0f}s)", flush=True)
                done, last_progress = now_done, time.monotonic()
            if done >= args.runs:
                break
            if done >= next_kill:
                next_kill = (done // args.kill_every + 1) * args.kill_every
                kill_pending_since = time.monotonic()
            if kill_pending_since is not None:
                busy = busy_workers(deployment, api)
                if busy or time.monotonic() - kill_pending_since > args.busy_wait:
                    # the worker whose turn it is if it runs a task, else the other if that one does
                    order = [WORKERS[(turn + k) % len(WORKERS)] for k in range(len(WORKERS))]
                    name = next((n for n in order if n in busy), order[0])
                    turn = WORKERS.index(name) + 1
                    kill_worker(deployment, faults, done, name, busy.get(name))
                    kill_pending_since = None
            if done >= next_restart:
                next_restart = (done // args.restart_every + 1) * args.restart_every
                kill_scheduler(deployment, faults, done)
            if time.monotonic() - last_progress > args.run_timeout:
                raise SystemExit(f"no run finished in {args.run_timeout:.0f} s ({done} of {args.runs} done):\n"
                                 f"{where_tasks_are(api, runs)}\nthe scheduler's log:\n{api.tail(3000)}")
            time.sleep(1 if kill_pending_since is not None else args.poll)
        soak_seconds = time.monotonic() - backfilled

        # -- the pipeline: its backfill done, each generated event once in its hub and its table; reprocessing adds none --
        pipeline = {"runs_ok": 0, "events": 0, "duplicates": 0, "losses": 0, "added_by_reprocessing": 0}
        if pipeline_days:
            pipeline_runs = api.wait_for_backfills([PIPELINE_DAG], 1, args.pipeline_timeout)[PIPELINE_DAG]
            generated, in_hub, in_table = pipeline_counts(deployment, pipeline_days)
            pipeline["runs_ok"], pipeline["events"] = len(pipeline_runs), sum(generated.values())
            pipeline["duplicates"] = sum(n - 1 for c in (in_hub, in_table) for n in c.values() if n > 1)
            pipeline["losses"] = sum(1 for c in (in_hub, in_table) for key in generated if key not in c)
            pipeline_backfill(deployment, pipeline_days, args.pipeline_rows, "--reprocess-behavior", "completed")
            api.wait_for_backfills([PIPELINE_DAG], 2, args.pipeline_timeout)
            _, hub_again, table_again = pipeline_counts(deployment, pipeline_days)
            pipeline["added_by_reprocessing"] = (sum(hub_again.values()) - sum(in_hub.values())
                                                 + sum(table_again.values()) - sum(in_table.values()))
            print(f"{PIPELINE_DAG}: {len(pipeline_runs)} runs, {pipeline['events']} events generated by Spark; in the hub "
                  f"{sum(in_hub.values())}, in the table {sum(in_table.values())}: {pipeline['duplicates']} duplicates, "
                  f"{pipeline['losses']} lost; the reprocessing backfill added {pipeline['added_by_reprocessing']} "
                  f"({time.monotonic() - started:.0f}s)", flush=True)

        # -- the watcher: every event of the bursts in the live table, once --
        sent_at = bursts.close()
        deadline = time.monotonic() + args.watch_timeout
        while set(sent_at) - set(sampler.seen) and time.monotonic() < deadline:
            api.check_alive()
            time.sleep(2)
        sampler.close()
        delays = delivery_times(sent_at, sampler.seen, sent_at)
        in_table = sink_counts(deployment.root / "example.db")
        watcher = {
            "events": len(sent_at), "losses": sum(1 for key in sent_at if key not in in_table),
            "duplicates": sum(n - 1 for key, n in in_table.items() if n > 1),
            "strangers": sum(n for key, n in in_table.items() if key not in sent_at),
        }
        seen_delays = [d for d in delays.values() if d != float("inf")]
        watcher["max_s"] = f"{max(seen_delays):.1f}" if seen_delays else "nan"
        watcher["p95_s"] = f"{percentile(seen_delays, 0.95):.1f}" if seen_delays else "nan"
        print(f"{WATCHER_DAG} watching {WATCHED_HUB}: {watcher['events']} events sent in bursts, "
              f"{len(seen_delays)} in live_order_events, max {watcher['max_s']} s, p95 {watcher['p95_s']} s from the "
              f"acknowledged send; {watcher['duplicates']} duplicates, {watcher['losses']} lost, "
              f"{watcher['strangers']} not sent", flush=True)

        # -- the runs, their tries, and exactly once in each hub --
        tries = {(backend, r["dag_run_id"]): [ti["try_number"] for ti in api.task_instances(dag_id(backend), r["dag_run_id"])]
                 for backend in BACKENDS for r in runs[backend]}
        retried = sorted((key, t) for key, ts in tries.items() for t in ts if t > 1)
        durations = sorted((datetime.fromisoformat(r["end_date"]) - datetime.fromisoformat(r["start_date"])).total_seconds()
                           for rs in runs.values() for r in rs)
        problems = []
        duplicates = losses = strangers = 0
        for backend in BACKENDS:
            run_days = sorted(r["data_interval_start"][:10] for r in runs[backend])
            if run_days != [d.isoformat() for d in days]:
                problems.append(f"{dag_id(backend)}'s runs are not the backfilled days: {run_days[:5]} ... ({len(run_days)})")
            endpoint = EventHubsEndpoint.from_connection_string(deployment.event_hubs_connection_string(), hubs[backend])
            in_hub = Counter(e.properties.get("order_id") for e in read_hub(endpoint))
            expected = expected_orders(days, args.rows)
            hub_duplicates = sum(n - 1 for n in in_hub.values() if n > 1)
            hub_losses = sum(1 for key in expected if key not in in_hub)
            hub_strangers = sum(n for key, n in in_hub.items() if key not in expected)
            print(f"hub {hubs[backend]}: {sum(expected.values())} orders expected, {sum(in_hub.values())} events in the hub "
                  f"({len(in_hub)} distinct): {hub_duplicates} duplicates, {hub_losses} lost, {hub_strangers} not expected",
                  flush=True)
            duplicates, losses, strangers = duplicates + hub_duplicates, losses + hub_losses, strangers + hub_strangers
        for thread in threading.enumerate():  # the readers' links are detached in the background
            if thread.name.startswith("eh-ingest-close-"):
                thread.join(timeout=15)
    finally:
        for thread in (bursts, sampler):
            if thread is not None:
                thread.stop.set()
        deployment.stop()

    names = samples[-1].services if samples else SERVICES
    windows = [w for name in names
               if (w := window(name, samples, args.warmup, args.restart_warmup, faults.restarts.get(name, []))) is not None]
    by_name = {w.name: w for w in windows}
    print(f"per service, each over its last uninterrupted stretch: from run {args.warmup} (or {args.restart_warmup} runs "
          f"after its last restart) to the mean of its last five samples; restarts: after which run")
    print(*table(windows), sep="\n")
    ok = sum(1 for rs in runs.values() for r in rs if r["state"] == "success")
    print(f"{ok} of {args.runs} runs succeeded in {soak_seconds:.0f}s; run time median {durations[len(durations) // 2]:.0f}s, "
          f"max {durations[-1]:.0f}s; faults: {faults.kills} worker kills ({faults.kills_mid_task} while it ran a task), "
          f"{faults.scheduler_kills} scheduler kills, {faults.triggerer_restarts} triggerer restarts; "
          f"{len(retried)} task instance(s) retried" + "".join(f"\n  retried: {key[1]} try {t}" for key, t in retried[:20]))
    for problem in problems:
        print(problem)

    def pct(name: str) -> str:
        return f"{by_name[name].growth:.1f}" if name in by_name else "nan"

    worker_growth = max((by_name[n].growth for n in WORKERS if n in by_name), default=float("nan"))
    figures = {
        "runs": args.runs, "runs_ok": ok, "kills": faults.kills, "kills_mid_task": faults.kills_mid_task,
        "scheduler_kills": faults.scheduler_kills, "triggerer_restarts": faults.triggerer_restarts,
        "duplicates": duplicates, "losses": losses, "retried": len(retried),
        "pipeline_runs_ok": pipeline["runs_ok"], "pipeline_events": pipeline["events"],
        "pipeline_duplicates": pipeline["duplicates"], "pipeline_losses": pipeline["losses"],
        "pipeline_added_by_reprocessing": pipeline["added_by_reprocessing"],
        "watcher_events": watcher["events"], "watcher_max_s": watcher["max_s"], "watcher_p95_s": watcher["p95_s"],
        "watcher_duplicates": watcher["duplicates"], "watcher_losses": watcher["losses"],
        "api_server_rss_growth_pct": pct("api-server"), "scheduler_rss_growth_pct": pct("scheduler"),
        "dag_processor_rss_growth_pct": pct("dag-processor"), "triggerer_rss_growth_pct": pct("triggerer"),
        "worker_rss_growth_pct": f"{worker_growth:.1f}", "event_hubs_rss_growth_pct": pct("event-hubs"),
        "azurite_rss_growth_pct": pct("azurite"), "redis_rss_growth_pct": pct("redis"),
        "postgres_rss_growth_pct": pct("postgres"), "seconds": round(time.monotonic() - started),
    }
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    watcher_bad = watcher["duplicates"] or watcher["losses"] or watcher["strangers"]
    pipeline_bad = pipeline["duplicates"] or pipeline["losses"] or pipeline["added_by_reprocessing"]
    return 1 if duplicates or losses or strangers or problems or ok != args.runs or watcher_bad or pipeline_bad else 0


def main() -> int:
    """Run the deployment soak and report each service's growth; exit status 1 on a failed run, duplicate or loss."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="DAG runs in all, half on each state backend (even)")
    parser.add_argument("--rows", type=int, default=200, help="orders a run publishes (about 3 KB each)")
    parser.add_argument("--warmup", type=int, default=20, help="runs before growth is measured")
    parser.add_argument("--restart-warmup", type=int, default=10, help="runs after a service's restart before it is measured")
    parser.add_argument("--kill-every", type=int, default=25, help="SIGKILL a worker (the busy one) every N finished runs")
    parser.add_argument("--restart-every", type=int, default=50,
                        help="SIGKILL the scheduler and restart the triggerer every N finished runs")
    parser.add_argument("--busy-wait", type=float, default=60, help="seconds to wait for a worker to run a task before a kill")
    parser.add_argument("--poll", type=float, default=3, help="seconds between two looks at the runs")
    parser.add_argument("--run-timeout", type=float, default=600, help="seconds without a finished run before the soak gives up")
    parser.add_argument("--pipeline-days", type=int, default=14, help="days of eh_daily_orders to backfill (0: none)")
    parser.add_argument("--pipeline-rows", type=int, default=20, help="orders a day of eh_daily_orders")
    parser.add_argument("--pipeline-timeout", type=float, default=2400,
                        help="seconds for the pipeline's backfill to finish once the publish runs have")
    parser.add_argument("--burst-orders", type=int, default=4, help="orders (3 events each) a burst sends to orders-live")
    parser.add_argument("--burst-every", type=float, default=20, help="seconds between two bursts")
    parser.add_argument("--safety-schedule", default="* * * * *", help="eh_on_new_orders's safety run (a cron expression)")
    parser.add_argument("--watch-timeout", type=float, default=300,
                        help="seconds after the last burst for its events to reach live_order_events")
    parser.add_argument("--full-install", action="store_true",
                        help="install the pinned third-party packages into the soak's venv too (as make deployment), "
                             "instead of sharing this environment's")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, Airflow home, venv)")
    args = parser.parse_args()
    if args.runs < 2 or args.runs % 2 or args.runs > 2000:
        parser.error("--runs must be even, between 2 and 2000 (half of them on each DAG)")
    if args.warmup < 1 or args.runs < args.warmup + 5:
        parser.error("--warmup must be at least 1 and --runs at least --warmup + 5")
    if min(args.kill_every, args.restart_every) < 1 or args.restart_warmup < 0:
        parser.error("--kill-every and --restart-every must be at least 1, --restart-warmup at least 0")
    if not 1 <= args.rows <= 10_000:
        parser.error("--rows must be between 1 and 10000 (the DAG's param)")
    for tool in ("redis-server", "initdb"):
        if not shutil.which(tool) and not (tool == "initdb" and list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
            raise SystemExit(f"{tool} not found: make prerequisites (Debian's redis-server and postgresql)")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the deployment (the finally blocks) on SIGTERM too
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="bench-soak-deployment-"))
    print(f"deployment soak: {args.runs} runs, worker killed every {args.kill_every}, scheduler every "
          f"{args.restart_every}, warm-up {args.warmup}; work dir {root}", flush=True)
    try:
        return soak(args, root, started)
    except (StandaloneError, httpx.HTTPError) as exc:
        print(f"the soak failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"work dir kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
