"""The view's overview of a hub: its partitions, producer groups (with their batches' task instances), consumer
groups and dead letters, read side by side, with how long each read took."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.plugins.links import link_batches
from airflow_provider_eh.plugins.readers.consumers import consumer_groups
from airflow_provider_eh.plugins.readers.dead_letters import dead_letters
from airflow_provider_eh.plugins.readers.ledgers import is_stale, producer_groups
from airflow_provider_eh.plugins.readers.partitions import partition_properties
from airflow_provider_eh.plugins.readers.reading import Reading

#: how long an open batch may wait before the overview calls it stale, unless the request says otherwise
DEFAULT_THRESHOLD = 3600.0


def overview(reading: Reading, threshold: float, may_read: Callable[[Iterable[str]], set[str]],
             may_read_variable: Callable[[str], bool] | None = None) -> dict[str, Any]:
    """The overview of ``reading``'s hub: batches open longer than ``threshold`` seconds are stale; links to task
    instances only for the DAGs ``may_read`` keeps; producer states in the Variables ``may_read_variable`` allows."""
    started = time.perf_counter()
    timings: dict[str, float] = {}

    def timed(name: str, read: Callable[[], Any]) -> Any:
        begin = time.perf_counter()
        try:
            return read()
        finally:
            timings[name] = round(time.perf_counter() - begin, 3)

    now = datetime.now(UTC)
    endpoint = reading.endpoint
    with ThreadPoolExecutor(2) as pool:  # the hub's management requests, then the checkpoints; the state blobs beside
        props_future = pool.submit(timed, "partitions", lambda: partition_properties(reading))
        consumers_future = pool.submit(
            timed, "consumer_groups", lambda: consumer_groups(reading, props_future.result(), now))
        producers = timed("producer_groups", lambda: producer_groups(reading, now, may_read_variable))
        props = props_future.result()
        consumers = consumers_future.result()
    batches = []
    for group in producers:
        for row in group["partitions"]:
            for batch in filter(None, [row.get("last_committed"), *row.get("open_batches", [])]):
                batches.append((group["group"], batch))
                if "age_seconds" in batch:
                    batch["stale"] = is_stale(batch["age_seconds"], threshold)
    timed("task_instances", lambda: link_batches(batches, may_read))
    dead = timed("dead_letters", lambda: dead_letters(reading))
    return {
        "namespace": endpoint.namespace,
        "hub": endpoint.eventhub_name,
        "read_at": now.isoformat(),
        "pending_threshold_seconds": threshold,
        "partitions": props,
        "producer_groups": producers,
        "consumer_groups": consumers,
        "dead_letters": dead,
        "elapsed_seconds": round(time.perf_counter() - started, 3),
        "timings": timings,
    }
