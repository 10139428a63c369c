"""The driver's commit spread over processes, each Event Hubs partition published by exactly one of them.

One Python process publishes at the pace of one core: each event's stamps, the SDK batches and the AMQP
frames are Python. Spark calls a writer's ``commit`` once, on the driver, after every task has finished,
when the executors' cores are idle. :func:`publish_in_processes` splits the batch's partitions into groups of
about as many events each (:func:`partition_groups`) and publishes each group from a child process of its
own (``python -m airflow_provider_eh.spark.datasource.publish``, the driver's interpreter and ``sys.path``;
no fork of the driver, no import of its main module), which runs :func:`run_child`. Each partition still has one publisher,
which holds its claim and sends under it: per partition the protocol is the one-process commit's.

A child ends with its parent: Linux's ``PR_SET_PDEATHSIG`` where there is one, and a thread that watches
the parent everywhere. A driver killed mid-commit leaves no sender behind beyond what a lost process
always leaves: a partition in doubt, which the next attempt recovers by reading it back under its claim.
A stalled child (SIGSTOP, a frozen VM) is what a stalled one-process commit is: fenced once another attempt
takes its partitions over.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from airflow_provider_eh.errors import CommitProcessError
from airflow_provider_eh.publishing import PartitionResult
from airflow_provider_eh.publishing.driver import Progress, carry_progress, rank_errors
from airflow_provider_eh.spark.datasource.options import WriteOptions
from airflow_provider_eh.spark.datasource.staging import StagedRun

log = logging.getLogger(__name__)

#: the module a commit process runs (``python -m``): it calls :func:`run_child` with its one-process publish
CHILD_MODULE = "airflow_provider_eh.spark.datasource.publish"

#: events per commit process the default asks for: below it a child's start (about a second) costs more
#: than the core it adds
EVENTS_PER_PROCESS = 20_000


def commit_processes(options: WriteOptions, counts: Mapping[str, int]) -> int:
    """How many processes commit a batch of ``counts`` events per partition: ``commitProcesses`` if given,
    else one per :data:`EVENTS_PER_PROCESS` events up to the driver's cores; never more than the partitions
    that have events."""
    partitions = sum(1 for n in counts.values() if n)
    if options.commit_processes is not None:
        wanted = options.commit_processes
    else:
        wanted = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
                     -(-sum(counts.values()) // EVENTS_PER_PROCESS))
    return max(1, min(wanted, partitions))


def partition_groups(counts: Mapping[str, int], processes: int) -> list[list[str]]:
    """The partitions with events in ``processes`` groups of about equal events: the largest partition first,
    each into the group with the fewest events so far. Each group in partition order; no empty group."""
    groups: list[list[str]] = [[] for _ in range(max(1, processes))]
    load = [0] * len(groups)
    for partition, events in sorted(counts.items(), key=lambda item: (-item[1], len(item[0]), item[0])):
        if events <= 0:
            continue
        least = load.index(min(load))
        groups[least].append(partition)
        load[least] += events
    return [sorted(g, key=lambda p: (len(p), p)) for g in groups if g]


def runs_of(runs: Sequence[StagedRun], partitions: Sequence[str]) -> list[StagedRun]:
    """``runs`` cut down to ``partitions``' slices; runs that hold none of them left out."""
    wanted = set(partitions)
    cut = [replace(run, slices={p: s for p, s in run.slices.items() if p in wanted}) for run in runs if run.blob]
    return [run for run in cut if run.slices]


def publish_in_processes(options: WriteOptions, runs: Sequence[StagedRun], batch_id: str,
                         groups: Sequence[Sequence[str]], *,
                         origin: Mapping[str, Any] | None = None) -> dict[str, PartitionResult]:
    """Publish each group of partitions of the batch ``runs`` hold from a child process; every partition's result.

    Every child runs to its end whatever the others do (each partition's commit is its own); then, if any
    failed, the error no retry can cure first is raised (as the one-process commit ranks its partitions'),
    carrying which partitions committed.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    children: list[tuple[Sequence[str], subprocess.Popen[bytes]]] = []
    try:
        for group in groups:
            payload = pickle.dumps({"options": options, "runs": runs_of(runs, group), "batch_id": batch_id,
                                    "origin": dict(origin or {}), "level": logging.getLogger().getEffectiveLevel()})
            proc = subprocess.Popen([sys.executable, "-m", CHILD_MODULE, str(os.getpid())], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, env=env)
            children.append((group, proc))
            assert proc.stdin is not None
            proc.stdin.write(payload)
            proc.stdin.close()
        results: dict[str, PartitionResult] = {}
        errors: list[tuple[str, BaseException]] = []
        for group, proc in children:
            assert proc.stdout is not None
            answer = proc.stdout.read()
            code = proc.wait()
            try:
                kind, value = pickle.loads(answer)
            except Exception:
                kind, value = "error", CommitProcessError(
                    f"the commit process of partitions {', '.join(group)} ended with exit code {code} and no answer")
            if kind == "ok":
                results.update(value)
            else:
                errors.append((",".join(group), value))
    finally:
        for _, proc in children:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if errors:
        everything = [partition for group in groups for partition in group]
        raise carry_progress(rank_errors(errors)[0][1], Progress.of(everything, results), replace=True)
    return results


def _carried(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (to the parent and back), else a :class:`CommitProcessError` naming it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return CommitProcessError(f"{type(exc).__name__}: {exc}")


def _end_with_parent(parent: int) -> None:
    """Die with ``parent``, the process that started this one: SIGKILL on its death where Linux can say so,
    and everywhere a thread that notices this process has another parent (``parent`` gone, even before)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.5)

    threading.Thread(target=watch, name="eh-commit-parent", daemon=True).start()


PublishPartitions = Callable[..., dict[str, PartitionResult]]


def run_child(publish_partitions: PublishPartitions) -> None:
    """A commit process's whole life: read its request (pickled, on stdin), publish its partitions with
    ``publish_partitions`` (the one-process publish), write its answer (pickled, on stdout). Its one
    argument is the parent's PID."""
    _end_with_parent(int(sys.argv[1]))
    request = pickle.load(sys.stdin.buffer)
    logging.basicConfig(level=request["level"], stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s [commit process]: %(message)s")
    try:
        answer: tuple[str, Any] = ("ok", publish_partitions(request["options"], request["runs"], request["batch_id"],
                                                             origin=request["origin"]))
    except BaseException as exc:  # the parent raises it, with the other processes' progress
        answer = ("error", _carried(exc))
    sys.stdout.buffer.write(pickle.dumps(answer))
    sys.stdout.buffer.flush()
