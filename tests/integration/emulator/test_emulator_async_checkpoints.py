"""The async SDK's processor with the async BlobCheckpointStore on Azurite resumes after its checkpoints."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import Any

from azure.eventhub import EventData, EventHubProducerClient
from azure.eventhub.aio import EventHubConsumerClient
from azure.eventhub.extensions.checkpointstoreblobaio import BlobCheckpointStore
from azure.storage.blob import BlobServiceClient

PARTITIONS = ("0", "1")
CHECKPOINT_AT = 6


def _publish(conn_str: str, count: int) -> None:
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        for p in PARTITIONS:
            batch = producer.create_batch(partition_id=p)
            for i in range(count):
                batch.add(EventData(f"p{p}-{i}"))
            producer.send_batch(batch)


async def _process(conn_str: str, blob_conn_str: str, container: str, count: int, *,
                   checkpoint_at: int | None = None, timeout: float = 30) -> dict[str, list[int]]:
    """
    Sequence numbers per partition the processor receives (earliest where no checkpoint): ``count``,
    then a second and a half more for any beyond; checkpoints at ``checkpoint_at`` on every partition.
    """
    store = BlobCheckpointStore.from_connection_string(blob_conn_str, container)
    client = EventHubConsumerClient.from_connection_string(
        conn_str, consumer_group="$Default", checkpoint_store=store,
        load_balancing_strategy="greedy", load_balancing_interval=1,
    )
    seen: dict[str, list[int]] = defaultdict(list)
    enough = asyncio.Event()

    async def on_event(context: Any, event: EventData | None) -> None:
        if event is None:
            return
        seen[context.partition_id].append(event.sequence_number)
        if event.sequence_number == checkpoint_at:
            await context.update_checkpoint(event)
        if sum(map(len, seen.values())) >= count:
            enough.set()

    async with store:
        task = asyncio.ensure_future(client.receive(on_event, starting_position="-1", max_wait_time=1))
        try:
            await asyncio.wait_for(enough.wait(), timeout)
            await asyncio.sleep(1.5)
        finally:
            await client.close()
            done, _ = await asyncio.wait({task}, timeout=5)
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    return dict(seen)


def test_async_processor_checkpoints_and_a_second_processor_resumes_after_the_checkpoint(hub, emulator_azurite):
    container = f"checkpoints-{uuid.uuid4().hex[:8]}"
    BlobServiceClient.from_connection_string(emulator_azurite.connection_string).create_container(container)
    _publish(hub.conn_str, 10)

    first = asyncio.run(_process(hub.conn_str, emulator_azurite.connection_string, container, 20,
                                 checkpoint_at=CHECKPOINT_AT))
    assert first == {p: list(range(10)) for p in PARTITIONS}

    async def listed() -> dict[str, int]:
        async with BlobCheckpointStore.from_connection_string(emulator_azurite.connection_string, container) as store:
            checkpoints = await store.list_checkpoints(f"127.0.0.1:{hub.emulator.port}", hub.name, "$Default")
        return {c["partition_id"]: c["sequence_number"] for c in checkpoints}

    assert asyncio.run(listed()) == {p: CHECKPOINT_AT for p in PARTITIONS}

    _publish(hub.conn_str, 2)
    second = asyncio.run(_process(hub.conn_str, emulator_azurite.connection_string, container, 2 * 5))
    assert second == {p: list(range(CHECKPOINT_AT + 1, 12)) for p in PARTITIONS}
