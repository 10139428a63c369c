"""Lag of a consumer group, in events and in time, and the background reads that find the time.

Lag in time is the age, when read, of the oldest event a consumer group has not processed: now minus
the enqueued time of the event just after its checkpoint (the first event of the partition when it
has none). That event is read for lagging partitions only, in the background, :data:`PROBE_THREADS`
at a time for the whole API server, as ``Source.lag_consumer_group`` (a non-exclusive reader: a
processor holding the partition exclusively makes the read fail, never the other way round). A
request waits :data:`PROBE_WAIT` seconds for those reads; a lag in time not read by then is ``None``
and filled in on a later refresh. The enqueued time of the first event after a checkpoint position
never changes: the latest 8,192 positions are kept across requests.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Iterable
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.redaction import log_failure

log = logging.getLogger(__name__)

PROBE_THREADS = 8
PROBE_TIMEOUT = 30.0
PROBE_WAIT = 3.0
PROBE_RETRY_AFTER = 30.0

_FIRST_UNPROCESSED = Cache(None, 8192)
_UNREADABLE = Cache(PROBE_RETRY_AFTER, 8192)
_PROBING: dict[tuple[str, str, str, int], Future[Any]] = {}
_PROBING_LOCK = threading.RLock()  # a future done at once runs its callback under it
_PROBE_POOL: ThreadPoolExecutor | None = None


def lag_events(last_enqueued: int, checkpointed: int | None) -> int:
    """Events enqueued after the checkpoint (all of them when there is none)."""
    return max(0, last_enqueued - (-1 if checkpointed is None else checkpointed))


def lag_seconds(behind: int, first_unprocessed_enqueued: datetime | None, now: datetime) -> float | None:
    """How old, at ``now``, the oldest event the group has not processed is: 0 when it is not behind,
    ``None`` when that event's enqueued time could not be read."""
    if behind <= 0:
        return 0.0
    if first_unprocessed_enqueued is None:
        return None
    return round(max(0.0, (now - first_unprocessed_enqueued).total_seconds()), 1)


def first_unprocessed_times(
    endpoint: Any, consumer_group: str, positions: Iterable[tuple[str, int]], wait: float = PROBE_WAIT,
) -> dict[tuple[str, int], datetime | None]:
    """Enqueued time of the first event after each ``(partition, sequence number)`` (``-1``: the partition's
    first event); ``None`` for those not read yet.

    Positions not remembered are read in the background, :data:`PROBE_THREADS` at a time for the whole
    API server, each for :data:`PROBE_TIMEOUT` seconds at most; the call waits ``wait`` seconds for them
    and returns what is read by then (the rest is there for the next refresh). An enqueued time never
    changes, so a position is read once; one that could not be read is tried again after
    :data:`PROBE_RETRY_AFTER` seconds.
    """
    out: dict[tuple[str, int], datetime | None] = {}
    pending: dict[tuple[str, int], Future[datetime | None]] = {}
    for position in sorted(set(positions)):
        key = _probe_key(endpoint, position)
        hit, value = _FIRST_UNPROCESSED.peek(key)
        if not hit:
            hit, value = _UNREADABLE.peek(key)
        if hit:
            out[position] = value
            continue
        with _PROBING_LOCK:
            future = _PROBING.get(key)
            if future is None:
                future = _probe_pool().submit(_probe, endpoint, consumer_group, position, PROBE_TIMEOUT)
                _PROBING[key] = future
                future.add_done_callback(functools.partial(_probed, key))
        pending[position] = future
    if pending:
        futures.wait(pending.values(), timeout=wait)
    for position, future in pending.items():
        out[position] = future.result() if future.done() and not future.exception() else None
    return out


def _probe_pool() -> ThreadPoolExecutor:
    global _PROBE_POOL
    with _PROBING_LOCK:
        if _PROBE_POOL is None:
            _PROBE_POOL = ThreadPoolExecutor(PROBE_THREADS, thread_name_prefix="eh-view-probe")
        return _PROBE_POOL


def _probed(key: tuple[str, str, str, int], done: Future[datetime | None]) -> None:
    value = None if done.exception() else done.result()
    if value is None:
        _UNREADABLE.put(key, None)
    else:
        _FIRST_UNPROCESSED.put(key, value)
    with _PROBING_LOCK:
        _PROBING.pop(key, None)


def _probe_key(endpoint: Any, position: tuple[str, int]) -> tuple[str, str, str, int]:
    return (endpoint.fully_qualified_namespace, endpoint.eventhub_name, position[0], position[1])


def _probe(endpoint: Any, consumer_group: str, position: tuple[str, int], timeout: float) -> datetime | None:
    """The enqueued time of the first event after ``position``, read as ``consumer_group``; ``None`` after ``timeout`` seconds."""
    from airflow_provider_eh.client.partition_readers import STOP, PartitionsReader

    partition_id, after = position
    what = (f"reading the enqueued time after sequence number {after} of partition {partition_id} "
            f"as consumer group {consumer_group!r}")
    arrived: queue.Queue[Any] = queue.Queue()
    reader = PartitionsReader(endpoint, consumer_group, {partition_id: after}, sink=arrived, max_batch_size=1,
                              max_wait_time=1.0, prefetch=1, convert=lambda _partition, fields: fields)
    deadline = time.monotonic() + timeout
    try:
        reader.start()
        while (left := deadline - time.monotonic()) > 0:
            try:
                _, item = arrived.get(timeout=left)
            except queue.Empty:
                break
            if item is STOP:
                break
            if isinstance(item, BaseException):
                log_failure(what, item)
                return None
            if item:
                return item[0].enqueued_time  # UTC
        log.info("Event Hubs view: %s: nothing within %.0f s", what, timeout)
        return None
    except Exception as exc:
        log_failure(what, exc)
        return None
    finally:
        reader.close()
