"""Everything the Event Hubs view reads, in one place: producer ledgers, consumer checkpoints, dead letters.

The view never writes. Producer states are read through the state store's public ``read`` (the same
decoding and checks as the engine), consumer checkpoints through
:class:`~airflow_provider_eh.checkpoints.blob_layout.CheckpointReader`, partitions through the SDK's
management requests, and dead letters through :class:`~airflow_provider_eh.ingest.store.SqlIngestStore`.

A request reads through one :class:`Reading`: each connection it names is read once and each client
built once. Across requests, what is safe to share is cached: partition properties for
:data:`PROPERTIES_TTL` seconds (every open tab refreshes the lag; they share one read), the hub's
partition ids for :data:`PARTITION_IDS_TTL` seconds, and the enqueued time of the first event after a
checkpoint position (it never changes; the latest 8,192 positions are kept).

Lag in time is the age, when read, of the oldest event a consumer group has not processed: now minus
the enqueued time of the event just after its checkpoint (the first event of the partition when it
has none). That event is read for lagging partitions only, in the background, :data:`PROBE_THREADS`
at a time for the whole API server, as ``Source.lag_consumer_group`` (a non-exclusive reader: a
processor holding the partition exclusively makes the read fail, never the other way round). A
request waits :data:`PROBE_WAIT` seconds for those reads; a lag in time not read by then is ``None``
and filled in on a later refresh.

Failures are reported by :mod:`~airflow_provider_eh.plugins.redaction`: what was read, the error's
class and what to check, never the error's text. Only names, numbers and times leave this module.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.redaction import ViewReadError, connection_secrets, failure, log_failure
from airflow_provider_eh.publishing.state import parse_time

log = logging.getLogger(__name__)

PRODUCER_STATE = "/producer-state/"
READ_THREADS = 16
PROPERTY_CLIENTS = 8
PROPERTIES_TTL = 2.0
PARTITION_IDS_TTL = 60.0
PROBE_THREADS = 8
PROBE_TIMEOUT = 30.0
PROBE_WAIT = 3.0
PROBE_RETRY_AFTER = 30.0
CHECKPOINT = "checkpoint"
OWNERSHIP = "ownership"


@dataclass(frozen=True)
class Source:
    """What one view shows: a hub of an Event Hubs connection and where its state lives."""

    event_hubs_conn_id: str
    eventhub_name: str | None = None
    wasb_conn_id: str = "wasb_default"
    state_container: str | None = None
    checkpoint_container: str | None = None
    consumer_groups: tuple[str, ...] = ()
    sql_conn_id: str | None = None
    sink_consumer_group: str = "$Default"
    sink_prefix: str | None = None
    lag_consumer_group: str = "$Default"

    def connection_ids(self) -> list[str]:
        ids = [self.event_hubs_conn_id]
        if self.state_container or self.checkpoint_container:
            ids.append(self.wasb_conn_id)
        if self.sql_conn_id:
            ids.append(self.sql_conn_id)
        return ids


_PROPERTIES = Cache(PROPERTIES_TTL, 256)
_PARTITION_IDS = Cache(PARTITION_IDS_TTL, 256)
_FIRST_UNPROCESSED = Cache(None, 8192)
_UNREADABLE = Cache(PROBE_RETRY_AFTER, 8192)
_PROBING: dict[tuple[str, str, str, int], Future[Any]] = {}
_PROBING_LOCK = threading.RLock()  # a future done at once runs its callback under it
_PROBE_POOL: ThreadPoolExecutor | None = None


class _OneRead:
    """A hook that takes the connection its request already read instead of reading it again."""

    seeded: Any

    def get_connection(self, conn_id: str) -> Any:  # type: ignore[override]
        if conn_id == self.seeded.conn_id:
            return self.seeded
        return super().get_connection(conn_id)  # type: ignore[misc]


@functools.cache
def _one_read(hook_class: type) -> type:
    return type(f"OneRead{hook_class.__name__}", (_OneRead, hook_class), {})


class Reading:
    """One request's reads of one :class:`Source`: each connection read once, each client built once.

    ``secrets`` holds the secrets of the connections read, for :func:`~airflow_provider_eh.plugins.redaction.scrub`.
    """

    def __init__(self, source: Source):
        self.source = source
        self.secrets: set[str] = set()
        self._connections: dict[str, Any] = {}
        self._lock = threading.Lock()

    def connection(self, conn_id: str) -> Any:
        from airflow.exceptions import AirflowNotFoundException
        from airflow.sdk import BaseHook

        with self._lock:
            if conn_id not in self._connections:
                try:
                    conn = BaseHook.get_connection(conn_id)
                except AirflowNotFoundException:
                    raise ViewReadError(
                        f"connection {conn_id!r} is not defined; check the connection ids in the view's settings", 404
                    ) from None
                self._connections[conn_id] = conn
                self.secrets |= connection_secrets(conn)
            return self._connections[conn_id]

    def _hook(self, base: type, conn_id: str, *args: Any) -> Any:
        hook = _one_read(base)(conn_id, *args)
        hook.seeded = self.connection(conn_id)
        return hook

    @functools.cached_property
    def endpoint(self) -> Any:
        from airflow_provider_eh.errors import ConnectionConfigError
        from airflow_provider_eh.hooks.event_hubs import EventHubsHook

        hook = self._hook(EventHubsHook, self.source.event_hubs_conn_id, self.source.eventhub_name)
        try:
            return hook.get_endpoint()
        except ConnectionConfigError as exc:
            raise ViewReadError(str(exc), 400) from None

    @functools.cached_property
    def blob_hook(self) -> Any:
        from airflow_provider_eh.hooks.blob import BlobStorageHook

        return self._hook(BlobStorageHook, self.source.wasb_conn_id)

    def container(self, name: str) -> Any:
        from airflow_provider_eh.errors import ConnectionConfigError

        try:
            return self.blob_hook.get_container_client(name)
        except ConnectionConfigError as exc:
            raise ViewReadError(str(exc), 400) from None


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat()


def _partition_key(partition_id: str) -> tuple[int, int | str]:
    return (0, int(partition_id)) if str(partition_id).isdigit() else (1, str(partition_id))


# ---- partitions --------------------------------------------------------------------------------


def partition_properties(reading: Reading) -> dict[str, dict[str, Any]]:
    """Per partition: first and last enqueued sequence numbers and the last enqueued time (shared for
    :data:`PROPERTIES_TTL` seconds between requests on the same connection and hub).

    The SDK opens a connection per management request, so the partitions are asked about from
    :data:`PROPERTY_CLIENTS` clients at once, each with a share of them.
    """
    endpoint = reading.endpoint
    key = (reading.source.event_hubs_conn_id, endpoint.fully_qualified_namespace, endpoint.eventhub_name)
    what = (f"reading the partitions of Event Hub {endpoint.eventhub_name!r} on {endpoint.fully_qualified_namespace} "
            f"(connection {reading.source.event_hubs_conn_id!r})")

    def load() -> dict[str, dict[str, Any]]:
        try:
            partition_ids = _PARTITION_IDS.get(key, lambda: _partition_ids(endpoint))

            def share(ids: list[str]) -> dict[str, Any]:
                with endpoint.producer(retry_total=1) as own:
                    return {pid: own.get_partition_properties(pid) for pid in ids}

            shares = [s for s in (partition_ids[i::PROPERTY_CLIENTS] for i in range(PROPERTY_CLIENTS)) if s]
            props: dict[str, Any] = {}
            with ThreadPoolExecutor(len(shares) or 1) as pool:
                for part in pool.map(share, shares):
                    props.update(part)
        except Exception as exc:
            raise failure(what, exc, "Check the namespace, the hub name and the connection's credentials.") from None
        return {
            pid: {
                "beginning_sequence_number": int(props[pid].get("beginning_sequence_number", 0)),
                "last_enqueued_sequence_number": int(props[pid]["last_enqueued_sequence_number"]),
                "last_enqueued_time": iso(props[pid].get("last_enqueued_time_utc")),
            }
            for pid in sorted(props, key=_partition_key)
        }

    return _PROPERTIES.get(key, load)


def _partition_ids(endpoint: Any) -> list[str]:
    with endpoint.producer(retry_total=1) as client:
        return [str(p) for p in client.get_eventhub_properties()["partition_ids"]]


# ---- producer ledgers --------------------------------------------------------------------------


def producer_state_blobs(container: Any, namespace: str, hub: str) -> list[tuple[str, str, datetime | None]]:
    """``(group as stored in the path, partition, last modified)`` of every producer state of the hub: one listing."""
    prefix = f"{namespace}/{hub}/".lower()
    found = []
    for blob in container.list_blobs(name_starts_with=prefix):
        group, sep, partition = blob.name[len(prefix):].rpartition(PRODUCER_STATE)
        if sep and group and partition and "/" not in partition:
            found.append((group, partition, blob.last_modified))
    return found


def is_stale(age_seconds: float | None, threshold: float) -> bool:
    """An open batch is highlighted once it is older than the threshold; one of unknown age is not."""
    return age_seconds is not None and age_seconds > threshold


def _age(since: datetime | None, now: datetime) -> float | None:
    return None if since is None else round((now - since).total_seconds(), 1)


def committed_row(record: Any) -> dict[str, Any]:
    """One committed batch as the view shows it (a ledger record with its batch id)."""
    return {
        "batch_id": record.batch_id, "events": record.events, "first_seq": record.first_seq,
        "last_seq": record.last_seq, "committed_at": record.committed_at, "origin": record.origin,
    }


def summarise_state(state: Any, modified: datetime | None, now: datetime) -> dict[str, Any]:
    """One ledger as the view shows it: next sequence number, owner level, last committed batch, open batches."""
    record = state.last_committed
    last = None if record is None else committed_row(record)
    open_batches = []
    if state.pending:
        started = parse_time(state.pending.started_at) or modified
        open_batches.append({
            "kind": "pending", "batch_id": state.pending.batch_id, "events": state.pending.events,
            "since": iso(started), "age_seconds": _age(started, now), "origin": state.pending.origin,
        })
    for batch_id, part in state.partial.items():
        landed = sum(stop - start for start, stop in part.landed or [])  # [start, stop) ranges of event indexes
        open_batches.append({
            "kind": "partial", "batch_id": batch_id, "events": part.events, "landed": landed,
            "since": iso(modified), "age_seconds": _age(modified, now), "origin": part.origin,
        })
    return {
        "partition": state.partition,
        "owner_level": state.owner_level,
        "next_sequence_number": state.last_published_seq + 1,
        "committed_batches": state.committed_count,
        "last_committed": last,
        "open_batches": open_batches,
        "updated": iso(modified),
    }


def group_ledgers(rows: Iterable[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """``(group, partition row)`` pairs as groups in name order, each with its partitions in partition order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for group, row in rows:
        groups.setdefault(group, []).append(row)
    return [
        {"group": group, "partitions": sorted(found, key=lambda r: _partition_key(r["partition"]))}
        for group, found in sorted(groups.items())
    ]


def producer_groups(reading: Reading, now: datetime | None = None) -> list[dict[str, Any]]:
    """Producer groups of the hub in ``state_container`` (Blob backend), each with its partitions' ledgers."""
    from airflow_provider_eh.errors import EventHubsProviderError
    from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
    from airflow_provider_eh.publishing.state import StateKey

    source = reading.source
    if not source.state_container:
        return []
    now = now or datetime.now(timezone.utc)
    endpoint = reading.endpoint
    container = reading.container(source.state_container)
    store = BlobProducerStateStore(container)
    try:
        blobs = producer_state_blobs(container, endpoint.namespace, endpoint.eventhub_name)
    except Exception as exc:
        raise failure(
            f"listing producer states in container {source.state_container!r} (connection {source.wasb_conn_id!r})", exc,
            "Check that the container exists and that the connection may read it.",
        ) from None

    def read(item: tuple[str, str, datetime | None]) -> tuple[str, dict[str, Any]]:
        group, partition, modified = item
        key = StateKey(endpoint.namespace, endpoint.eventhub_name.lower(), group, partition)
        try:
            state = store.read(key)
        except EventHubsProviderError as exc:  # the package's own words: which blob, what is wrong with it
            return group, {"partition": partition, "error": f"{type(exc).__name__}: {exc}"}
        except Exception as exc:  # one unreadable ledger must not hide the others
            return group, {"partition": partition, "error": failure(f"reading {key.blob_name}", exc, "").message}
        if state is None:
            return group, {"partition": partition, "error": "state blob vanished while reading"}
        return state.group, summarise_state(state, modified, now)

    with ThreadPoolExecutor(READ_THREADS) as pool:
        return group_ledgers(pool.map(read, blobs))


def ledger_history(reading: Reading, group: str, partition: str, before: int | None, limit: int) -> dict[str, Any]:
    """One page of a partition's committed batches, newest first (the ledger's history records, read by
    ordinal: a page costs ``limit`` small reads however long the history)."""
    from airflow_provider_eh.errors import EventHubsProviderError
    from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
    from airflow_provider_eh.publishing.state import StateKey

    source = reading.source
    if not source.state_container:
        raise ViewReadError("the ledger's history is read from the state container: name state_container", 400)
    endpoint = reading.endpoint
    store = BlobProducerStateStore(reading.container(source.state_container))
    key = StateKey(endpoint.namespace, endpoint.eventhub_name.lower(), group, partition)
    try:
        page = store.history(key, before=before, limit=limit)
    except EventHubsProviderError as exc:  # the package's own words: which record, what is wrong with it
        raise ViewReadError(f"{type(exc).__name__}: {exc}", 502) from None
    except Exception as exc:
        raise failure(f"reading the ledger history of {key}", exc,
                      "Check that the container exists and that the connection may read it.") from None
    return {
        "group": group, "partition": partition, "total": page.total, "before": page.before,
        "batches": [{**committed_row(r), "ordinal": r.ordinal} for r in page.batches],
    }


# ---- consumer groups ---------------------------------------------------------------------------


def discover_consumer_groups(container: Any, fully_qualified_namespace: str, hub: str) -> list[str]:
    """Consumer groups with checkpoint or ownership blobs of the hub, whichever SDK wrote them.

    The namespace is looked for as configured and without its port (Python writes
    ``127.0.0.1:5672/<hub>/...``, JavaScript ``127.0.0.1/<hub>/...``), paths in any case (most SDKs
    lower-case them, early Go releases kept the configured case): one listing per spelling, with the
    prefix both cases share. A group found under several spellings is returned once, as first found.
    """
    from airflow_provider_eh.checkpoints.blob_layout import namespace_spellings

    found: dict[str, str] = {}
    for namespace in namespace_spellings(fully_qualified_namespace):
        spelled = f"{namespace}/{hub}/"
        lowered = spelled.lower()
        common = next((i for i, (a, b) in enumerate(zip(spelled, lowered)) if a != b), len(spelled))
        for blob in container.list_blobs(name_starts_with=spelled[:common]):
            if not blob.name.lower().startswith(lowered):
                continue
            parts = blob.name[len(lowered):].split("/")
            if len(parts) == 3 and parts[0] and parts[2] and parts[1].lower() in (CHECKPOINT, OWNERSHIP):
                found.setdefault(parts[0].lower(), parts[0])
    return sorted(found.values(), key=str.lower)


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
                future.add_done_callback(lambda done, key=key: _probed(key, done))
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
    from airflow_provider_eh.client.receive import STOP, PartitionsReader

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


def consumer_row(partition: str, last_enqueued: int, checkpoint: Any, owner: Any,
                 first_unprocessed: datetime | None, now: datetime) -> dict[str, Any]:
    """One partition of one consumer group: checkpointed and last enqueued sequence numbers, lag in events and time."""
    seq = checkpoint.sequence_number if checkpoint else None
    behind = lag_events(last_enqueued, seq)
    return {
        "partition": partition, "checkpointed": seq, "last_enqueued": last_enqueued, "lag_events": behind,
        "lag_seconds": lag_seconds(behind, first_unprocessed, now),
        "oldest_unprocessed_enqueued_at": iso(first_unprocessed) if behind else None,
        "checkpointed_at": iso(checkpoint.last_modified if checkpoint else None),
        "owner": owner.owner_id if owner else None,
    }


def consumer_groups(reading: Reading, props: Mapping[str, Mapping[str, Any]], now: datetime | None = None) -> list[dict[str, Any]]:
    """Per consumer group and partition: checkpointed and last enqueued sequence numbers, lag in events and time."""
    from airflow_provider_eh.checkpoints.blob_layout import CheckpointReader

    source = reading.source
    if not source.checkpoint_container:
        return []
    now = now or datetime.now(timezone.utc)
    endpoint = reading.endpoint
    container = reading.container(source.checkpoint_container)
    what = f"reading checkpoints in container {source.checkpoint_container!r} (connection {source.wasb_conn_id!r})"
    hint = "Check that the container exists and that the connection may read it."
    try:
        names = list(source.consumer_groups) or discover_consumer_groups(
            container, endpoint.fully_qualified_namespace, endpoint.eventhub_name
        )
        reader = CheckpointReader(container, endpoint.fully_qualified_namespace, endpoint.eventhub_name)
        reads = {}
        for name in names:
            if name.lower() not in reads:
                reads[name.lower()] = reader.read(name)
    except Exception as exc:
        raise failure(what, exc, hint) from None
    positions = set()
    for read in reads.values():
        for pid, prop in props.items():
            seq = read.sequence_number(pid)
            if lag_events(prop["last_enqueued_sequence_number"], seq) > 0:
                positions.add((pid, -1 if seq is None else seq))
    times = first_unprocessed_times(endpoint, source.lag_consumer_group, positions)
    out = []
    for read in reads.values():
        rows = []
        for pid in sorted(props, key=_partition_key):
            seq = read.sequence_number(pid)
            rows.append(consumer_row(
                pid, props[pid]["last_enqueued_sequence_number"], read.checkpoints.get(pid), read.ownership.get(pid),
                times.get((pid, -1 if seq is None else seq)), now,
            ))
        out.append({"consumer_group": read.consumer_group, "partitions": rows})
    return out


# ---- dead letters ------------------------------------------------------------------------------


def dead_letters(reading: Reading) -> dict[str, Any] | None:
    """Dead letters of the configured SQL sink by reason, and the command that replays them."""
    from airflow_provider_eh.ingest.schema import DEFAULT_PREFIX
    from airflow_provider_eh.ingest.store import SqlIngestStore, Stream

    source = reading.source
    if not source.sql_conn_id:
        return None
    endpoint = reading.endpoint
    prefix = source.sink_prefix or DEFAULT_PREFIX
    conn = reading.connection(source.sql_conn_id)
    try:
        store = SqlIngestStore(conn.get_hook().get_conn(),
                               Stream(endpoint.namespace, endpoint.eventhub_name, source.sink_consumer_group),
                               prefix=prefix, create_tables=False)
        try:
            letters = store.dead_letters(status="dead")
        finally:
            store.close()
    except Exception as exc:
        raise failure(f"reading dead letters through connection {source.sql_conn_id!r} (table prefix {prefix!r})", exc,
                      "Check the sink's connection and table prefix.") from None
    reasons: dict[str, dict[str, Any]] = {}
    for letter in letters:
        entry = reasons.setdefault(letter.reason, {"reason": letter.reason, "count": 0, "partitions": {}, "oldest": None})
        entry["count"] += 1
        pid = letter.event.partition_id
        entry["partitions"][pid] = entry["partitions"].get(pid, 0) + 1
        if entry["oldest"] is None or str(letter.failed_at) < entry["oldest"]:
            entry["oldest"] = str(letter.failed_at)
    command = (
        f"python -m airflow_provider_eh.ingest --sql-conn-id {source.sql_conn_id} --namespace {endpoint.namespace} "
        f"--eventhub {endpoint.eventhub_name} --consumer-group '{source.sink_consumer_group}'"
        + (f" --prefix {prefix}" if prefix != DEFAULT_PREFIX else "")
        + " --table <target table> --row-function <package.module:function> replay"
    )
    return {
        "sql_conn_id": source.sql_conn_id, "consumer_group": source.sink_consumer_group, "total": len(letters),
        "by_reason": sorted(reasons.values(), key=lambda r: (-r["count"], r["reason"])), "replay_command": command,
    }
