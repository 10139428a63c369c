"""Helpers of the publishing tests: a test's hub and state container, a subprocess runner, exactly-once checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azure.storage.blob import ContainerClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, derive_batch_id
from airflow_provider_eh.testing.crash import ENV as CRASH_ENV, PAUSE_ENV
from airflow_provider_eh.client.readback import read_hub

RUNNER = Path(__file__).with_name("publish_runner.py")
REPO = Path(__file__).resolve().parents[3]


@dataclass
class PublishSetup:
    """One test's hub and state container, and ways to publish into them."""

    event_hubs: Any
    azurite: Any
    hub: str
    container_name: str

    @property
    def endpoint(self) -> EventHubsEndpoint:
        return EventHubsEndpoint.from_connection_string(self.event_hubs.connection_string(self.hub), self.hub)

    @property
    def container(self) -> ContainerClient:
        return ContainerClient.from_connection_string(self.azurite.connection_string, self.container_name)

    def publisher(self, group: str = "g", **kwargs: Any) -> IdempotentPublisher:
        store = BlobProducerStateStore(self.container, claim_timeout=kwargs.pop("claim_timeout", 0))
        return IdempotentPublisher(self.endpoint, store, producer_group=group, **kwargs)

    def start(self, events: list[Any], batch_id: str, *, group: str = "g", crash_at: str | None = None,
              pause_at: str | None = None, claim_timeout: float = 0, **options: Any) -> subprocess.Popen[str]:
        config = {
            "eh": self.event_hubs.connection_string(self.hub), "hub": self.hub,
            "blob": self.azurite.connection_string, "container": self.container_name,
            "group": group, "batch_id": batch_id, "events": events, "claim_timeout": claim_timeout,
            **options,
        }
        env = {k: v for k, v in os.environ.items() if k not in (CRASH_ENV, PAUSE_ENV)}
        env["PYTHONPATH"] = str(REPO)
        if crash_at or pause_at:  # armed in every Python process it starts, by a test-side sitecustomize
            env.update({CRASH_ENV: crash_at} if crash_at else {PAUSE_ENV: str(pause_at)})
            env["PYTHONPATH"] += os.pathsep + str(REPO / "tests" / "support" / "crash_site")
        fd, path = tempfile.mkstemp(prefix="publish-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(config, fh)
        return subprocess.Popen([sys.executable, str(RUNNER), path], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def run(self, events: list[Any], batch_id: str, **kwargs: Any) -> tuple[int, dict[str, Any], str]:
        proc = self.start(events, batch_id, **kwargs)
        out, err = proc.communicate(timeout=300)
        result = json.loads(out.strip().splitlines()[-1]) if proc.returncode == 0 and out.strip() else {}
        return proc.returncode, result, err

    def read_back(self) -> list[Any]:
        return read_hub(self.endpoint)


def events_for(prefix: str, n: int, partitions: int = 4, size: int = 0) -> list[dict[str, Any]]:
    """``n`` JSON events ``{"id": "<prefix>-<i>"}`` spread round-robin over the partitions."""
    return [
        {"body": {"id": f"{prefix}-{i}", "pad": "x" * size}, "partition_id": str(i % partitions), "properties": {"i": i}}
        for i in range(n)
    ]


def batch(name: str) -> str:
    return derive_batch_id("g", "dag", name, logical_date="2026-01-01T00:00:00+00:00")


def assert_exactly_once(read: list[Any], events: list[dict[str, Any]]) -> None:
    """Every input event is on its partition exactly once, and each partition's eh.seq increase in log order."""
    ids = [json.loads(e.body)["id"] for e in read]
    want = [e["body"]["id"] for e in events]
    assert sorted(ids) == sorted(want), f"{len(ids)} read, {len(want)} expected; dupes={len(ids) - len(set(ids))}"
    by_partition: dict[str, list[int]] = {}
    for e in read:
        by_partition.setdefault(e.partition, []).append(int(e.properties["eh.seq"]))
    for seqs in by_partition.values():
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
