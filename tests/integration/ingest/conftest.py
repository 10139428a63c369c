"""Fixtures of the ingestion tests: publishing stamped events with the plain SDK, and a SQLite sink."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from typing import Any

import pytest
import sinks
from azure.eventhub import EventData, EventHubProducerClient
from azure.storage.blob import ContainerClient
from worker import rows

from airflow_provider_eh.checkpoints.blob_layout import CheckpointReader
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream

WORKER = Path(__file__).with_name("worker.py")
TABLE = "CREATE TABLE IF NOT EXISTS events (id TEXT NOT NULL, partition_id TEXT NOT NULL, sequence_number BIGINT NOT NULL)"


def publish(conn_str: str, by_partition: Mapping[str, Iterable[dict]]) -> None:
    """Send events (``{"body": ..., "properties": ...}``) to their partitions, in order, one batch per partition."""
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        for partition_id, events in by_partition.items():
            batch = producer.create_batch(partition_id=partition_id)
            for item in events:
                event = EventData(json.dumps(item["body"]))
                event.properties = item.get("properties", {})
                batch.add(event)
            producer.send_batch(batch)


def stamped(partition_id: str, count: int, *, group: str = "pub", start: int = 0) -> list[dict]:
    """Events with ``eh.group``/``eh.seq`` stamps and ids ``p<partition>-<seq>``."""
    return [
        {"body": {"id": f"p{partition_id}-{i}"}, "properties": {"eh.group": group, "eh.seq": i, "eh.batch": "b0", "eh.owner": 1}}
        for i in range(start, start + count)
    ]


def ingest(eh_conn_str: str, sink_db: Path, *, container=None, sessions=None, row_function=rows, on_batch=None,
           **limits) -> dict:
    """One ingestion run of ``$Default`` into ``sink_db``'s ``events`` (blob checkpoints mirrored to ``container``); its summary."""
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)
    stream = Stream(endpoint.namespace, endpoint.eventhub_name, "$Default")
    store = SqlIngestStore(sqlite3.connect(sink_db), stream)
    try:
        run = IngestRun(
            endpoint, "$Default", store, BatchProcessor("events", row_function, sessions=sessions),
            owner_id="test", container_client=container,
            limits=RunLimits(batch_size=50, max_wait_time=0.3, max_duration=60, **limits), on_batch=on_batch,
        )
        return run.run()
    finally:
        store.close()


@pytest.fixture
def eh_conn_str(event_hubs, hub) -> str:
    return event_hubs.connection_string(hub)


@pytest.fixture
def sink_db(tmp_path) -> Path:
    """A SQLite file holding the target table ``events``."""
    path = tmp_path / "sink.db"
    with sqlite3.connect(path) as conn:
        conn.execute(TABLE)
    return path


def table_rows(db: Any) -> list[tuple[str, str, int]]:
    return sinks.table_rows(str(db) if isinstance(db, Path) else db)


def sql_checkpoints(db: Any) -> dict[str, int]:
    return sinks.sql_checkpoints(str(db) if isinstance(db, Path) else db)


@pytest.fixture
def run_worker(eh_conn_str, hub, azurite, container, sink_db, tmp_path) -> Callable[..., subprocess.CompletedProcess]:
    """Run one worker process to its end (or its crash); ``**config`` overrides the defaults."""

    def run(*, wait: bool = True, **config):
        full = {
            "eh": eh_conn_str, "hub": hub, "blob": azurite.connection_string, "container": container,
            "db": str(sink_db), "owner": "w0", "trace": str(tmp_path / "trace.jsonl"),
            "limits": {"batch_size": 10, "max_wait_time": 0.3, "max_duration": 90, "ownership_expiry": 6, "poll_interval": 0.5},
            **config,
        }
        cmd = [sys.executable, str(WORKER), json.dumps(full)]
        if not wait:
            return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=os.environ.copy())

    return run


def blob_checkpoints(azurite, container, eh_conn_str) -> dict[str, int | None]:
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)
    client = ContainerClient.from_connection_string(azurite.connection_string, container)
    read = CheckpointReader(client, endpoint.fully_qualified_namespace, endpoint.eventhub_name).read("$Default")
    return {p: read.sequence_number(p) for p in read.checkpoints}


def trace(tmp_path: Path) -> list[dict]:
    path = tmp_path / "trace.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def forked_worker(eh_conn_str, hub, azurite, container, tmp_path):
    """Run one worker (``**config`` over the defaults) in a child of a ``worker.py --serve`` process; its exit."""
    server = subprocess.Popen(
        [sys.executable, str(WORKER), "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=WORKER.parent, env=os.environ.copy(),
    )
    log = tmp_path / "worker.log"

    def run(**config):
        full = {
            "eh": eh_conn_str, "hub": hub, "blob": azurite.connection_string, "container": container,
            "owner": "w0", "trace": str(tmp_path / "trace.jsonl"), "log": str(log),
            "limits": {"batch_size": 10, "max_wait_time": 0.3, "max_duration": 90, "ownership_expiry": 6, "poll_interval": 0.5},
            **config,
        }
        server.stdin.write(json.dumps(full) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        assert answer, f"the worker server ended: {log.read_text()[-2000:] if log.exists() else ''}"
        return json.loads(answer)["returncode"], log.read_text()

    yield run
    server.stdin.close()
    server.wait(timeout=30)
