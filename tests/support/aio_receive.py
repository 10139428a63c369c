"""The first error the aio consumer reports to ``on_error``, and how long after a moment it came."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


def first_receive_error(connection_string: str, consumer_group: str, partition_id: str, *, within: float,
                        ready: Callable[[], bool] = lambda: True, then: Callable[[], None] = lambda: None,
                        ) -> tuple[Exception, float]:
    """Receive ``partition_id`` with the aio consumer (no SDK retries); once ``ready()`` (polled for up to 15 s),
    call ``then()`` and wait up to ``within`` seconds for ``on_error``: its first error and the seconds since
    ``then()`` (the test fails when none came)."""
    from azure.eventhub.aio import EventHubConsumerClient

    async def run() -> tuple[Exception, float]:
        client = EventHubConsumerClient.from_connection_string(connection_string, consumer_group=consumer_group,
                                                               retry_total=0)
        errors: list[tuple[float, Exception]] = []

        async def on_event(_ctx: Any, _event: Any) -> None:
            pass

        async def on_error(_ctx: Any, error: Exception) -> None:
            errors.append((time.monotonic(), error))

        task = asyncio.ensure_future(client.receive(on_event, partition_id=partition_id, starting_position="-1",
                                                    on_error=on_error))
        try:
            for _ in range(300):
                if ready():
                    break
                await asyncio.sleep(0.05)
            started = time.monotonic()
            then()
            for _ in range(int(within / 0.05)):
                if errors:
                    break
                await asyncio.sleep(0.05)
        finally:
            await client.close()
            await asyncio.wait({task}, timeout=3)
        assert errors, "on_error was not called"
        return errors[0][1], errors[0][0] - started

    return asyncio.run(run())
