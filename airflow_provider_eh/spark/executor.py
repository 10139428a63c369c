"""What runs on Spark executors, one Spark partition at a time, over Arrow record batches.

No Spark and no Airflow import: these are the functions the job hands to ``mapInArrow``, and they
only need ``pyarrow``, the mapping and the publishing engine. Three steps:

* :func:`map_rows`: row → partition, body, content hash (the order's tie-breaker) and the slot that
  routes the row to its Spark partition; every per-row check runs here;
* :func:`fingerprint_rows` (pass 1): per Event Hubs partition, count and fingerprint, in order;
* :func:`send_rows` (pass 2): per partition with a plan, :func:`~airflow_provider_eh.publishing.send_partition`;
  returns a pickled :class:`~airflow_provider_eh.publishing.driver.SendOutcome`: the report, or the error as data.

The prepared rows arrive sorted by (partition, order columns, content hash), so each partition's
events are one consecutive run of rows in a deterministic order.
"""

from __future__ import annotations

import itertools
import pickle
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.publishing.driver import SendOutcome
from airflow_provider_eh.publishing.fingerprint import Fingerprint
from airflow_provider_eh.publishing.landed import landed_stamps, partition_end
from airflow_provider_eh.publishing.sender import send_partition
from airflow_provider_eh.spark.mapping import BODY_COL, HASH_COL, PARTITION_COL, SLOT_COL, RowMapping, content_hash

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_provider_eh.client.endpoint import EventHubsEndpoint
    from airflow_provider_eh.publishing.hold_relay import HoldTicket
    from airflow_provider_eh.publishing.plan import PartitionPlan


def map_batch(batch: pa.RecordBatch, mapping: RowMapping,
              partition_ids: Sequence[str]) -> tuple[list[str], list[bytes], list[bytes]]:
    """Each row's ``(partition, content hash, body)`` as three lists; raises on the first bad row (the rulebook's
    checks). What both Spark paths run per row: the operator's executors and the data source's tasks."""
    rows = (batch if mapping.whole_row else batch.select(mapping.required_columns())).to_pylist()
    partitions, hashes, bodies = [], [], []
    for row in rows:
        partition, body, props = mapping.event_of(row, partition_ids)
        partitions.append(partition)
        hashes.append(content_hash(body, props))
        bodies.append(body)
    return partitions, hashes, bodies


def map_rows(
    batches: Iterable[pa.RecordBatch],
    mapping: RowMapping,
    partition_ids: Sequence[str],
    slots: Mapping[str, int],
    kept: Sequence[str],
) -> Iterator[pa.RecordBatch]:
    """Each input row as ``(partition, slot, hash, body, *kept columns)``; raises on the first bad row."""
    import pyarrow as pa

    for batch in batches:
        partitions, hashes, bodies = map_batch(batch, mapping, partition_ids)
        columns = [
            pa.array(partitions, pa.string()),
            pa.array([slots[p] for p in partitions], pa.int64()),
            pa.array(hashes, pa.binary()),
            pa.array(bodies, pa.binary()),
            *(batch.column(name) for name in kept),
        ]
        yield pa.RecordBatch.from_arrays(columns, names=[PARTITION_COL, SLOT_COL, HASH_COL, BODY_COL, *kept])


def _events(batches: Iterable[pa.RecordBatch], mapping: RowMapping) -> Iterator[tuple[str, bytes, dict[str, Any] | None]]:
    """``(partition, body, properties)`` of every prepared row, in order."""
    props_cols = mapping.property_columns
    for batch in batches:
        partitions = batch.column(PARTITION_COL).to_pylist()
        bodies = batch.column(BODY_COL).to_pylist()
        if not props_cols:
            yield from zip(partitions, bodies, itertools.repeat(None), strict=False)
            continue
        values = [batch.column(c).to_pylist() for c in props_cols]
        for partition, body, *row in zip(partitions, bodies, *values, strict=True):
            yield partition, body, mapping.event_properties(dict(zip(props_cols, row, strict=True)))


def _by_partition(
    batches: Iterable[pa.RecordBatch], mapping: RowMapping
) -> Iterator[tuple[str, Iterator[tuple[bytes, dict[str, Any] | None]]]]:
    """Consecutive runs of one partition's events; a partition split over two runs is a bug, so it raises."""
    seen: set[str] = set()
    for partition, group in itertools.groupby(_events(batches, mapping), key=lambda e: e[0]):
        if partition in seen:
            raise RuntimeError(f"partition {partition}: its rows are not consecutive in the Spark partition")
        seen.add(partition)
        yield partition, ((body, props) for _, body, props in group)


def fingerprint_rows(batches: Iterable[pa.RecordBatch], mapping: RowMapping) -> Iterator[pa.RecordBatch]:
    """Pass 1: one row ``(partition, count, fingerprint)`` per Event Hubs partition in this Spark partition."""
    import pyarrow as pa

    out: list[tuple[str, int, str]] = []
    for partition, events in _by_partition(batches, mapping):
        fp = Fingerprint(mapping.content_type)
        for body, props in events:
            fp.update(body, props)
        out.append((partition, fp.count, fp.hexdigest()))
    if out:
        partitions, counts, digests = zip(*out, strict=True)
        yield pa.RecordBatch.from_arrays(
            [pa.array(partitions, pa.string()), pa.array(counts, pa.int64()), pa.array(digests, pa.string())],
            names=["partition", "count", "fingerprint"],
        )


def _first_attempt() -> bool:
    """False in a retried or speculative Spark task: it must not send, or stamps would land twice."""
    try:
        from pyspark import TaskContext
    except ImportError:  # outside Spark (unit tests)
        return True
    ctx = TaskContext.get()
    return ctx is None or ctx.attemptNumber() == 0


class _AlreadySent(Exception):
    """The plan's stamps are already on the partition: this task ran before."""


def _sent_before(endpoint: EventHubsEndpoint, plan: PartitionPlan, start: int) -> bool:
    """
    True when events of this plan already landed after the intent's start point: the task runs again
    (a resubmitted stage restarts attempt numbers at 0). Costs one partition-properties call when
    nothing was sent to the partition since the intent; reads back only when something was.
    """
    with endpoint.producer(retry_total=1) as client:
        end = partition_end(client, plan.partition_id)
    if end <= start:
        return False
    found = landed_stamps(endpoint, plan.partition_id, after_sequence_number=start, group=plan.group,
                          batch_stamp=plan.batch_stamp)
    return any(plan.first_seq <= seq < plan.first_seq + plan.send_count for seq in found)


class _SentBeforeCheck:
    """:func:`_sent_before` on a thread, overlapping the first SDK batch's encoding; ``__call__`` (the
    sender's ``stop_check``, run before each SDK send) waits for it once and raises if the plan was sent."""

    def __init__(self, endpoint: EventHubsEndpoint, plan: PartitionPlan, start: int | None):
        self._result: list[Any] = []
        self._thread: threading.Thread | None = None
        if start is not None:
            self._thread = threading.Thread(target=self._run, args=(endpoint, plan, start), daemon=True)
            self._thread.start()

    def _run(self, endpoint: EventHubsEndpoint, plan: PartitionPlan, start: int) -> None:
        try:
            self._result.append(_sent_before(endpoint, plan, start))
        except BaseException as exc:
            self._result.append(exc)

    def __call__(self) -> None:
        if self._thread is None:
            return
        self._thread.join()
        self._thread = None
        outcome = self._result[0]
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome:
            raise _AlreadySent()


def _both(first: Callable[[], None], second: Callable[[], None]) -> Callable[[], None]:
    def check() -> None:
        first()
        second()

    return check


# Producer clients kept per worker process between tasks (Spark reuses Python workers), for at most
# _IDLE_SECONDS: opening a link costs handshakes that take longer than sending many thousand events
# (bench/README.md, "Design figures").
# A kept client holds the worker's one connection to the hub (client.connection), which the task's
# other requests (the partition's end, a read-back) share.
_PRODUCERS: dict[EventHubsEndpoint, tuple[Any, float]] = {}
_IDLE_SECONDS = 30.0


def _producer(endpoint: EventHubsEndpoint) -> Any:
    cached = _PRODUCERS.pop(endpoint, None)
    if cached is not None:
        client, last_used = cached
        if time.monotonic() - last_used < _IDLE_SECONDS:
            return client
        client.close()
    return endpoint.producer(retry_total=0)


def _release(endpoint: EventHubsEndpoint, client: Any, healthy: bool) -> None:
    if healthy:
        _PRODUCERS[endpoint] = (client, time.monotonic())
    else:
        client.close()


def send_rows(
    batches: Iterable[pa.RecordBatch],
    mapping: RowMapping,
    endpoint: EventHubsEndpoint,
    plans: Mapping[str, PartitionPlan],
    starts: Mapping[str, int | None] | None = None,
    send_timeout: float = 60.0,
    holds: Mapping[str, HoldTicket] | None = None,
) -> Iterator[pa.RecordBatch]:
    """
    Pass 2: send each planned partition's events; one row ``(partition, outcome)`` per planned partition.

    ``outcome`` is a pickled :class:`~airflow_provider_eh.publishing.driver.SendOutcome`: errors travel as
    data so Spark never retries a send (a retried task would resend the same stamps).
    A retried or speculative task attempt, or one that finds the plan's stamps already after the
    intent's start point ``starts[partition]`` (the partition's end when the intent was written), sends
    nothing and reports ``failed``; the driver leaves the intent pending and recovers it by read-back.
    With ``holds[partition]`` (a :class:`~airflow_provider_eh.publishing.hold_relay.HoldTicket`), the driver's
    claim is confirmed before every SDK batch: a stalled driver's executors stop by its deadline.
    Partitions are sent one after the other, each one SDK batch at a time, so a task has at most one
    SDK batch in flight; where the lease alone fences, that batch holds at most the plan's
    ``lease_only_batch_bytes``.
    """
    import pyarrow as pa

    first = _first_attempt()
    starts = starts or {}
    out: list[tuple[str, bytes]] = []
    for partition, events in _by_partition(batches, mapping):
        plan = plans.get(partition)
        if plan is None or not first:
            for _ in events:  # nothing to send; drain the run
                pass
            if plan is not None:
                out.append((partition, pickle.dumps(_refused(partition))))
            continue
        outcome = _send_partition(endpoint, partition, plan, events, starts.get(partition),
                                  (holds or {}).get(partition), send_timeout)
        out.append((partition, pickle.dumps(outcome)))
    if out:
        partitions, outcomes = zip(*out, strict=True)
        yield pa.RecordBatch.from_arrays(
            [pa.array(partitions, pa.string()), pa.array(outcomes, pa.binary())], names=["partition", "outcome"]
        )


def _send_partition(endpoint: EventHubsEndpoint, partition: str, plan: PartitionPlan, events: Iterable[Any],
                    start: int | None, ticket: HoldTicket | None, send_timeout: float) -> SendOutcome:
    """One planned partition's send on a pooled producer: its outcome, an error as data."""
    producer = _producer(endpoint)
    healthy = False
    try:
        check = _SentBeforeCheck(endpoint, plan, start)
        stop_check = check if ticket is None else _both(ticket.watch(), check)
        report = send_partition(endpoint, plan, events, producer=producer, stop_check=stop_check,
                                send_timeout=send_timeout)
        check()
        healthy = True
        return SendOutcome.sent(partition, report)
    except _AlreadySent:
        return _refused(partition)
    except Exception as exc:
        return SendOutcome.failed(partition, exc)
    finally:
        _release(endpoint, producer, healthy)


def _refused(partition: str) -> SendOutcome:
    """What a retried task attempt, or one that finds the stamps already sent, reports: nothing was sent."""
    return SendOutcome.refused(partition, "RetriedSparkTask", f"partition {partition}: a retried Spark task attempt does "
                               "not send; the intent stays pending and is recovered by read-back")
