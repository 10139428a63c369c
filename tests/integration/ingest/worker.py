"""One ingestion instance as its own process, so that tests can SIGKILL it at a chosen point.

``python worker.py CONFIG_JSON``; the config names the hub, the container, the database (a SQLite
file, or a Postgres or MySQL/MariaDB server: see ``sinks.py``; or ``delta: {uri, storage_options}``, a Delta
table) and, optionally, ``crash: {stage, batch}``:
the process is SIGKILLed when it reaches that stage of that batch (counted from 1 in this process),
through the package's one fault-injection mechanism (:func:`airflow_provider_eh.testing.crash.crash_at`
on the step ``ingest_<stage>``). With ``replay: true`` it replays the dead letters instead, with the fixed
row function ``accept_all``, SIGKILLed at ``crash: {point}`` (a replay step) if given. Every stage is appended to ``trace`` as a JSON line
``{owner, stage, batch, partition, first, last, t}`` by an observer of the same steps, which sleeps
``pause`` seconds at each stage named in ``pause_at`` (every stage by default).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback

import deltalake  # noqa: F401  imported once by the --serve process, before it forks
import pandas  # noqa: F401  (deltalake's first write imports it: seconds each time without bytecode caches)
import pyarrow  # noqa: F401
from azure.storage.blob import ContainerClient
from sinks import connect

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.ingest import (
    BatchProcessor,
    IngestRun,
    RunLimits,
    SessionConfig,
    SqlIngestStore,
    Stream,
    replay_dead_letters,
)
from airflow_provider_eh.ingest.sinks.delta import DeltaIngestStore, DeltaTarget
from airflow_provider_eh.steps import observe
from airflow_provider_eh.testing.crash import crash_at


def rows(event):
    body = event.json()
    if body.get("poison"):
        raise ValueError(f"poison event {body['id']}")
    return {"id": body["id"], "partition_id": event.partition_id, "sequence_number": event.sequence_number}


def accept_all(event):
    """The fixed row function: poison events are fine now."""
    return {"id": event.json()["id"], "partition_id": event.partition_id, "sequence_number": event.sequence_number}


def main(config: dict) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("azure").setLevel(logging.WARNING)
    endpoint = EventHubsEndpoint.from_connection_string(config["eh"], config["hub"])
    container = (
        ContainerClient.from_connection_string(config["blob"], config["container"]) if config.get("container") else None
    )
    stream = Stream(endpoint.namespace, endpoint.eventhub_name, config.get("consumer_group", "$Default"))
    delta = config.get("delta")
    store = (DeltaIngestStore(DeltaTarget(delta["uri"], delta.get("storage_options")), stream) if delta
             else SqlIngestStore(connect(config["db"]), stream))
    sessions = SessionConfig.of(**config["sessions"]) if config.get("sessions") else None
    processor = BatchProcessor("events", rows, sessions=sessions)
    pause_at = set(config.get("pause_at") or ())

    def traced(step, batch, detail):
        if not step.startswith("ingest_"):
            return
        stage = step[len("ingest_"):]
        with open(config["trace"], "a") as trace:
            trace.write(json.dumps({
                "owner": config["owner"], "stage": stage, "batch": batch, "partition": detail["partition"],
                "first": detail["first"], "last": detail["last"], "t": time.time(),
            }) + "\n")
        if not pause_at or stage in pause_at:
            time.sleep(config.get("pause", 0))

    observe(traced)  # before the crash point: a killed stage is in the trace
    crash = config.get("crash") or {}
    if config.get("replay"):
        if crash:
            crash_at(crash["point"])
        print(json.dumps(replay_dead_letters(store, BatchProcessor("events", accept_all))), flush=True)
        return
    if crash:
        crash_at(f"ingest_{crash['stage']}:{crash['batch']}")

    run = IngestRun(
        endpoint, stream.consumer_group, store, processor,
        owner_id=config["owner"], container_client=container,
        limits=RunLimits(**config.get("limits", {})),
    )
    summary = run.run()
    print(json.dumps(summary), flush=True)


def serve() -> None:
    """
    ``python worker.py --serve``: read one config per line on stdin and run each in a child forked from
    this process, which has imported everything once (and started no thread); answer each line with
    ``{"returncode": ...}`` (negative: the signal that ended it). The child's output goes to ``config["log"]``.
    """
    for line in sys.stdin:
        config = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                with open(config["log"], "w") as log:
                    os.dup2(log.fileno(), 1)
                    os.dup2(log.fileno(), 2)
                    main(config)
                    code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"returncode": code}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve()
    else:
        main(json.loads(sys.argv[1]))
