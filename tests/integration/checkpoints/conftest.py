"""Fixtures for the checkpoint tests: publish with the SDK, and run the SDK's own consumer in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

CONSUMER_SCRIPT = Path(__file__).with_name("sdk_consumer.py")
CONSUMER_GROUP = "analytics"  # created beside $Default by the `hub` fixture


@pytest.fixture
def publish(connections: dict[str, str]) -> Callable[[dict[str, int]], dict[str, dict[str, int | None]]]:
    """Send ``{partition: count}`` events with the SDK producer; return the publish operator's XCom shape."""
    from azure.eventhub import EventData

    from airflow_provider_eh.hooks.event_hubs import EventHubHook

    def send(counts: dict[str, int]) -> dict[str, dict[str, int | None]]:
        result: dict[str, dict[str, int | None]] = {}
        with EventHubHook(connections["event_hubs"]).get_producer_client() as producer:
            for partition, count in counts.items():
                if count:
                    batch = producer.create_batch(partition_id=partition)
                    for i in range(count):
                        batch.add(EventData(json.dumps({"partition": partition, "i": i})))
                    producer.send_batch(batch)
                last = producer.get_partition_properties(partition)["last_enqueued_sequence_number"]
                result[partition] = {
                    "events": count,
                    "first_seq": last - count + 1 if count else None,
                    "last_seq": last if count else None,
                    "service_last_sequence_number": last if count else None,
                }
        return result

    return send


class ConsumerRunner:
    """Starts ``sdk_consumer.py`` processes and kills whatever is left at teardown."""

    def __init__(self, eh_conn_str: str, hub: str, storage_conn_str: str, container: str, log_dir: Path):
        self.args = [eh_conn_str, hub]
        self.storage = [storage_conn_str, container]
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, limits: dict[str, int], group: str = CONSUMER_GROUP) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"consumer-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, str(CONSUMER_SCRIPT), *self.args, group, *self.storage, json.dumps(limits)],
            stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def run(self, limits: dict[str, int], group: str = CONSUMER_GROUP, timeout: float = 60) -> None:
        """Start a consumer and wait until it has checkpointed its limits and exited."""
        proc = self.start(limits, group)
        try:
            assert proc.wait(timeout) == 0, self.output(proc)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"consumer did not reach {limits} in {timeout}s:\n{self.output(proc)}") from None

    def output(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.log_dir / f"consumer-{self.procs.index(proc)}.log").read_text()[-3000:]

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def consumers(
    event_hubs: object, azurite: object, connections: dict[str, str], container: str, tmp_path: Path
) -> Iterator[ConsumerRunner]:
    runner = ConsumerRunner(
        event_hubs.connection_string(connections["hub"]),  # type: ignore[attr-defined]
        connections["hub"],
        azurite.connection_string,  # type: ignore[attr-defined]
        container,
        tmp_path,
    )
    yield runner
    runner.stop_all()

