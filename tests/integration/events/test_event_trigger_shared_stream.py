"""The event trigger in Airflow's acknowledged shared stream: checkpoints move only for asset events confirmed stored.

Airflow's own ``SharedStreamManager`` (what the triggerer runs an ``AssetWatcher``'s trigger through)
drives the real ``EventHubBatchProducer`` against the local endpoint and Azurite. The test plays the
triggerer's part exactly as ``TriggerRunner.run_trigger`` and the supervisor do: take a trigger event
from the filter, bind it (``bind_pending_event``), pull the next one, and report it stored
(``confirm_persisted``) or not. The manager's clock is injected (its ``_now``) so the ack timeout
passes when the test says so, not after a wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.events import send_json
from airflow_provider_eh.triggers.event import EventHubEventTrigger

ACK_TIMEOUT = 30.0  # on the injected clock: never reached unless the test moves the clock


class Clock:
    """The manager's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _checkpoints(azurite: Any, container: str, hub: str) -> dict[str, int]:
    """``{partition: sequence number}`` of the group's checkpoint blobs (``<namespace>/<hub>/analytics/checkpoint/<id>``)."""
    from azure.storage.blob import ContainerClient

    client = ContainerClient.from_connection_string(azurite.connection_string, container)
    found: dict[str, int] = {}
    for blob in client.list_blobs(include=["metadata"]):
        parts = blob.name.split("/")
        if len(parts) == 5 and parts[1:4] == [hub.lower(), "analytics", "checkpoint"]:
            found[parts[4]] = int(blob.metadata["sequencenumber"])
    return found


async def _until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.2)


async def _send(connections: dict[str, str], partition: str, bodies: list[dict]) -> None:
    await asyncio.to_thread(send_json, connections["event_hubs"], partition, bodies)


def test_checkpoints_move_only_after_the_asset_event_is_confirmed_stored_and_an_unconfirmed_batch_fires_again(
    connections: dict[str, str], container: str, azurite: Any
) -> None:
    from airflow.triggers.shared_stream import AckTimeout, SharedStreamManager

    hub = connections["hub"]
    trigger = EventHubEventTrigger(
        eventhub_name=hub, consumer_group="analytics", checkpoint_container=container, batch_size=100, batch_window=0.5,
    )
    key = trigger.shared_stream_key()
    checkpoints = lambda: _checkpoints(azurite, container, hub)  # noqa: E731

    async def scenario() -> None:
        clock = Clock()
        manager = SharedStreamManager(ack_timeout=ACK_TIMEOUT, _now=clock)
        events: AsyncIterator[Any] = trigger.filter_shared_stream(manager.subscribe(trigger_id=1, trigger=trigger, key=key))
        try:
            await _send(connections, "0", [{"n": i} for i in range(3)])
            first = await asyncio.wait_for(anext(events), 60)
            assert first.payload["partitions"] == {"0": {"first": 0, "last": 2, "count": 3}}
            seq_first = manager.bind_pending_event(trigger_id=1, key=key)
            assert seq_first is not None, "the trigger does not run in the acknowledged (ack) mode"

            # Move past the first batch, as the triggerer does right after queueing its event; a second
            # batch is read, fanned out and taken. The first was resolved by its subscriber but is not
            # confirmed stored: its checkpoint must not have moved (a producer that checkpoints as it
            # reads would have written it before yielding the second batch).
            await _send(connections, "1", [{"n": 10}, {"n": 11}])
            second = await asyncio.wait_for(anext(events), 60)
            assert second.payload["partitions"] == {"1": {"first": 0, "last": 1, "count": 2}}
            seq_second = manager.bind_pending_event(trigger_id=1, key=key)
            assert checkpoints() == {}, "a checkpoint moved before its asset event was confirmed stored"

            # The supervisor stored the first asset event: now, and only for it, the checkpoint moves.
            manager.confirm_persisted([seq_first])
            await _until(lambda: checkpoints() == {"0": 2}, 30, "the first batch's checkpoint after confirmation")

            # The second is never confirmed (the write failed, or the triggerer lost it): the ack timeout
            # fails it, the group ends, and a confirmation that comes after the timeout changes nothing.
            pulled = asyncio.ensure_future(anext(events))
            clock.now += ACK_TIMEOUT + 1
            with pytest.raises((AckTimeout, RuntimeError)):
                await asyncio.wait_for(pulled, 30)
            manager.confirm_persisted([seq_second])
        finally:
            await manager.unsubscribe(1, key)
        assert checkpoints() == {"0": 2}, "the unconfirmed batch was checkpointed"

        # The triggerer starts the trigger again (it does so for a watcher whose run ended): it reads
        # from the checkpoints, so the unconfirmed batch fires again and nothing is lost.
        manager = SharedStreamManager(ack_timeout=ACK_TIMEOUT, _now=clock)
        events = trigger.filter_shared_stream(manager.subscribe(trigger_id=2, trigger=trigger, key=key))
        try:
            again = await asyncio.wait_for(anext(events), 60)
            assert again.payload["partitions"] == second.payload["partitions"]
            manager.confirm_persisted([manager.bind_pending_event(trigger_id=2, key=key)])
            pulled = asyncio.ensure_future(anext(events))  # moving past it resolves it
            await _until(lambda: checkpoints() == {"0": 2, "1": 1}, 30, "the re-fired batch's checkpoint")
            pulled.cancel()
        finally:
            await manager.unsubscribe(2, key)

    asyncio.run(asyncio.wait_for(scenario(), timeout=240))
