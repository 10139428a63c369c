"""Fixtures for the local Event Hubs endpoint's own tests: the server as a child process on
ephemeral 127.0.0.1 ports, one fresh hub per test, Azurite for the checkpoint store, and helpers
that receive through the real SDK."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.eventhub import EventData, EventHubConsumerClient

from eventhubs_local import EmulatorProcess


@dataclass
class HubHandle:
    """A hub created for one test."""

    name: str
    partitions: int
    emulator: EmulatorProcess

    @property
    def conn_str(self) -> str:
        return self.emulator.connection_string(self.name)


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    """One emulator process for the session, ephemeral ports, data in a temporary directory."""
    data = tmp_path_factory.mktemp("emulator")
    with EmulatorProcess(data, log_path=data / "emulator.log", extra_args=["--fsync", "never"]) as proc:
        yield proc


@pytest.fixture
def hub(emulator: EmulatorProcess) -> Iterator[HubHandle]:
    """A new hub (4 partitions, consumer group ``analytics``) for each test; faults cleared afterwards."""
    name = f"hub-{uuid.uuid4().hex[:12]}"
    emulator.admin.create_hub(name, partitions=4, consumer_groups=["analytics"])
    yield HubHandle(name, 4, emulator)
    emulator.admin.clear_faults()


@pytest.fixture
def private_emulator(tmp_path: Path) -> Iterator[Callable[..., EmulatorProcess]]:
    """A factory for emulators of one test's own (for restarts, retention, auth); all stopped afterwards."""
    started: list[EmulatorProcess] = []

    def make(*extra_args: str, data_dir: Path | None = None, **kwargs: Any) -> EmulatorProcess:
        data = data_dir or tmp_path / f"eh-{len(started)}"
        proc = EmulatorProcess(data, extra_args=list(extra_args), **kwargs)
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.kill()


@pytest.fixture(scope="session")
def emulator_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Azurite's blob service on a free 127.0.0.1 port (for BlobCheckpointStore)."""
    from eventhubs_local.azurite import AzuriteProcess

    location = tmp_path_factory.mktemp("azurite")
    with AzuriteProcess(location) as proc:
        yield proc


def receive_sync(conn_str: str, partition_id: str, count: int, *, starting_position: Any = "-1",
                 inclusive: bool = False, consumer_group: str = "$Default", timeout: float = 15,
                 owner_level: int | None = None) -> list[EventData]:
    """Receive up to ``count`` events from one partition with the sync SDK client (stops early at ``count``)."""
    client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group=consumer_group)
    events: list[EventData] = []
    done = threading.Event()
    errors: list[Exception] = []

    def on_event(_ctx: Any, event: EventData | None) -> None:
        if event is not None:
            events.append(event)
            if len(events) >= count:
                done.set()

    def on_error(_ctx: Any, error: Exception) -> None:
        errors.append(error)

    kwargs: dict[str, Any] = dict(partition_id=partition_id, starting_position=starting_position,
                                  starting_position_inclusive=inclusive, on_error=on_error)
    if owner_level is not None:
        kwargs["owner_level"] = owner_level
    worker = threading.Thread(target=client.receive, args=(on_event,), kwargs=kwargs, daemon=True)
    worker.start()
    done.wait(timeout)
    client.close()
    worker.join(15)
    return events


async def receive_async(conn_str: str, partition_id: str, count: int, *, starting_position: Any = "-1",
                        inclusive: bool = False, consumer_group: str = "$Default",
                        timeout: float = 15) -> list[EventData]:
    """The same with the async SDK client."""
    from azure.eventhub.aio import EventHubConsumerClient as AsyncConsumer

    client = AsyncConsumer.from_connection_string(conn_str, consumer_group=consumer_group)
    events: list[EventData] = []
    done = asyncio.Event()

    async def on_event(_ctx: Any, event: EventData | None) -> None:
        if event is not None:
            events.append(event)
            if len(events) >= count:
                done.set()

    task = asyncio.ensure_future(client.receive(on_event, partition_id=partition_id,
                                                starting_position=starting_position,
                                                starting_position_inclusive=inclusive))
    try:
        await asyncio.wait_for(done.wait(), timeout)
    except asyncio.TimeoutError:
        pass
    await client.close()
    # the SDK's async receive() does not always return after close(); do not wait for it long
    done_tasks, _ = await asyncio.wait({task}, timeout=2)
    if not done_tasks:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return events


@pytest.fixture
def receive() -> Callable[..., list[EventData]]:
    return receive_sync


@pytest.fixture
def areceive() -> Callable[..., Any]:
    return receive_async


def wait_until(predicate: Callable[[], bool], timeout: float = 10, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@pytest.fixture
def until() -> Callable[..., bool]:
    return wait_until

