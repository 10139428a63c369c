"""Deleting a hub or a consumer group while the Python SDK uses it, as Event Hubs does.

The live links on it are detached with ``amqp:not-found`` naming the entity, new attaches and
``$management`` reads of it fail as for an entity that never was, and it is gone from the disk too.
The clients here run with ``retry_total=0``: the SDK's own retry loop retries even not-found errors
(0.8 s, 1.6 s, 3.2 s, 6.4 s of backoff with the default ``retry_total=3``), which says nothing about
the endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient
from azure.eventhub.aio import EventHubProducerClient as AsyncProducer
from azure.eventhub.exceptions import ConnectError, ConnectionLostError

from eventhubs_local import EmulatorAdminError, EmulatorProcess
from tests.support.aio_receive import first_receive_error

FAST = 5.0  # seconds: a failure that waits out no retry of the SDK's


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    """An endpoint of this module's own."""
    with EmulatorProcess(tmp_path_factory.mktemp("deletion"), extra_args=["--fsync", "never"]) as proc:
        yield proc


@pytest.fixture
def hub(endpoint: EmulatorProcess) -> str:
    """A new hub of 2 partitions with the consumer group ``analytics``."""
    name = f"hub-{uuid.uuid4().hex[:10]}"
    endpoint.admin.create_hub(name, partitions=2, consumer_groups=["analytics"])
    return name


def _not_found(endpoint: EmulatorProcess, hub: str, group: str | None = None) -> str:
    entity = f"sb://{endpoint.host}:{endpoint.port}/{hub}" + (f"/consumergroups/{group}" if group else "")
    return f"The messaging entity '{entity}' could not be found."


def test_admin_deletes_name_what_is_missing_and_keep_default(endpoint: EmulatorProcess, hub: str) -> None:
    """404s name the missing hub or group; ``$Default`` goes only with its hub; names match in any case."""
    admin = endpoint.admin
    with pytest.raises(EmulatorAdminError) as missing_hub:
        admin.delete_hub("no-such-hub")
    assert missing_hub.value.status == 404 and "'no-such-hub'" in str(missing_hub.value)
    with pytest.raises(EmulatorAdminError) as missing_group:
        admin.delete_consumer_group(hub, "no-such-group")
    assert missing_group.value.status == 404 and "'no-such-group'" in str(missing_group.value)
    with pytest.raises(EmulatorAdminError) as group_of_missing_hub:
        admin.delete_consumer_group("no-such-hub", "analytics")
    assert group_of_missing_hub.value.status == 404 and "'no-such-hub'" in str(group_of_missing_hub.value)
    with pytest.raises(EmulatorAdminError) as default:
        admin.delete_consumer_group(hub, "$Default")
    assert default.value.status == 400 and "$Default" in str(default.value) and "delete the hub" in str(default.value)

    admin.delete_consumer_group(hub, "ANALYTICS")
    assert admin.hub(hub)["consumer_groups"] == ["$Default"]
    admin.delete_hub(hub.upper())
    with pytest.raises(EmulatorAdminError) as gone:
        admin.hub(hub)
    assert gone.value.status == 404
    assert hub not in [h["name"] for h in admin.list_hubs()]


def test_deleted_hub_stays_deleted_after_a_restart_and_a_new_one_starts_empty(tmp_path: Path) -> None:
    """The deletion reaches hubs.json and the partition folders: a restart does not bring the hub back,
    and a hub created again under its name has none of its events. A hub named by ``--hub`` (or
    ``hubs=``) is created again at each start, so these are created through the admin API."""
    with EmulatorProcess(tmp_path / "data") as endpoint:
        endpoint.admin.create_hub("orders", partitions=2)
        endpoint.admin.create_hub("audit", partitions=1)
        with EventHubProducerClient.from_connection_string(endpoint.connection_string("orders")) as producer:
            producer.send_batch([EventData(f"event {i}") for i in range(3)])
        assert endpoint.admin.hub("orders")["events"] == 3
        endpoint.admin.delete_hub("orders")
        assert not (tmp_path / "data" / "hubs" / "orders").exists()
        endpoint.restart()
        assert [h["name"] for h in endpoint.admin.list_hubs()] == ["audit"]
        endpoint.admin.create_hub("orders", partitions=2)
        assert endpoint.admin.hub("orders")["events"] == 0
        with EventHubProducerClient.from_connection_string(endpoint.connection_string("orders")) as producer:
            assert producer.get_partition_properties("0")["is_empty"] is True


def test_sync_producer_on_a_deleted_hub_fails_with_not_found(endpoint: EmulatorProcess, hub: str,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """The producer's link is detached with amqp:not-found naming sb://host/hub; its next send_batch
    rebuilds the producer, whose $management read of the partitions is answered 404."""
    caplog.set_level(logging.DEBUG, logger="azure.eventhub._pyamqp")
    producer = EventHubProducerClient.from_connection_string(endpoint.connection_string(hub), retry_total=0,
                                                             logging_enable=True)
    with producer:
        batch = producer.create_batch()
        batch.add(EventData("before"))
        producer.send_batch(batch)
        endpoint.admin.delete_hub(hub)
        batch = producer.create_batch()
        batch.add(EventData("after"))
        started = time.monotonic()
        with pytest.raises(ConnectError) as info:
            producer.send_batch(batch)
        elapsed = time.monotonic() - started
    detaches = [r.getMessage() for r in caplog.records if "DetachFrame" in r.getMessage() and "not-found" in r.getMessage()]
    assert detaches and _not_found(endpoint, hub) in detaches[0], caplog.text[-2000:]
    error = info.value
    assert type(error) is ConnectError and "ErrorCondition.NotFound" in str(error)
    assert f"Status code: 404, Description: \"The messaging entity '{hub}' could not be found.\"" in str(error)
    assert elapsed < FAST


def test_async_producer_on_a_deleted_hub_fails_with_not_found(endpoint: EmulatorProcess, hub: str) -> None:
    """The same with the aio producer."""

    async def run() -> tuple[BaseException, float]:
        producer = AsyncProducer.from_connection_string(endpoint.connection_string(hub), retry_total=0)
        async with producer:
            await producer.send_batch([EventData("before")])
            endpoint.admin.delete_hub(hub)
            started = time.monotonic()
            with pytest.raises(ConnectError) as info:
                await producer.send_batch([EventData("after")])
            return info.value, time.monotonic() - started

    error, elapsed = asyncio.run(run())
    assert type(error) is ConnectError and "ErrorCondition.NotFound" in str(error)
    assert f"The messaging entity '{hub}' could not be found." in str(error)
    assert elapsed < FAST


class _Receiving:
    """A sync consumer receiving from partition 0 in a thread; its first error and when it came."""

    def __init__(self, conn_str: str, group: str):
        self.client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group=group, retry_total=0)
        self.events: list[EventData] = []
        self.errors: list[tuple[float, Exception]] = []
        self.first_error = threading.Event()
        self.thread = threading.Thread(target=self.client.receive, args=(self._on_event,), daemon=True,
                                       kwargs={"partition_id": "0", "starting_position": "-1", "on_error": self._on_error})

    def _on_event(self, _ctx: Any, event: EventData | None) -> None:
        if event is not None:
            self.events.append(event)

    def _on_error(self, _ctx: Any, error: Exception) -> None:
        self.errors.append((time.monotonic(), error))
        self.first_error.set()

    def __enter__(self) -> _Receiving:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.thread.join(15)


def _wait(predicate: Any, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_sync_consumer_of_a_deleted_consumer_group_fails_with_not_found(endpoint: EmulatorProcess, hub: str) -> None:
    """Its receiver is detached with amqp:not-found naming the consumer group; a receiver of another
    group of the hub keeps its link."""
    with EventHubProducerClient.from_connection_string(endpoint.connection_string(hub)) as producer:
        producer.send_batch([EventData("one")], partition_id="0")
    with _Receiving(endpoint.connection_string(hub), "analytics") as doomed, \
            _Receiving(endpoint.connection_string(hub), "$Default") as other:
        assert _wait(lambda: len(doomed.events) == 1 and len(other.events) == 1)
        deleted = time.monotonic()
        endpoint.admin.delete_consumer_group(hub, "analytics")
        assert doomed.first_error.wait(FAST)
        when, error = doomed.errors[0]
        assert type(error) is ConnectionLostError
        assert _not_found(endpoint, hub, "analytics") in str(error) and "amqp:not-found" in str(error)
        assert when - deleted < FAST
        assert [r["consumer_group"] for r in endpoint.admin.receivers(hub)] == ["$Default"]
        assert not other.errors


def test_sync_consumer_of_a_deleted_hub_fails_with_not_found(endpoint: EmulatorProcess, hub: str) -> None:
    """Deleting the hub detaches its receivers too, naming the hub."""
    with _Receiving(endpoint.connection_string(hub), "$Default") as receiving:
        assert _wait(lambda: bool(endpoint.admin.receivers(hub)))
        deleted = time.monotonic()
        endpoint.admin.delete_hub(hub)
        assert receiving.first_error.wait(FAST)
        when, error = receiving.errors[0]
        assert type(error) is ConnectionLostError and _not_found(endpoint, hub) in str(error)
        assert when - deleted < FAST
    assert endpoint.admin.receivers(hub) == []


def test_async_consumer_of_a_deleted_consumer_group_fails_with_not_found(endpoint: EmulatorProcess, hub: str) -> None:
    """The same with the aio consumer."""
    error, elapsed = first_receive_error(endpoint.connection_string(hub), "analytics", "0", within=FAST,
                                         ready=lambda: bool(endpoint.admin.receivers(hub)),
                                         then=lambda: endpoint.admin.delete_consumer_group(hub, "analytics"))
    assert type(error) is ConnectionLostError
    assert _not_found(endpoint, hub, "analytics") in str(error) and "amqp:not-found" in str(error)
    assert elapsed < FAST
