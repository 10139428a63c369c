"""Everything the Event Hubs view reads, in one place: producer ledgers, consumer checkpoints, dead letters.

The view never writes. Producer states are read through the state store's public ``read`` (the same
decoding and checks as the engine), consumer checkpoints through
:class:`~airflow_provider_eh.checkpoints.blob_layout.CheckpointReader`, last enqueued sequence numbers through
:class:`~airflow_provider_eh.hooks.checkpoints.CheckpointHook`, and dead letters through
:class:`~airflow_provider_eh.ingest.store.SqlIngestStore`. Nothing here returns a credential: the
connections are opened by the hooks, and only names, numbers and times leave this module.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

log = logging.getLogger(__name__)

PRODUCER_STATE = "/producer-state/"
READ_THREADS = 16
PROPERTY_CLIENTS = 8


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

    def connection_ids(self) -> list[str]:
        ids = [self.event_hubs_conn_id]
        if self.state_container or self.checkpoint_container:
            ids.append(self.wasb_conn_id)
        if self.sql_conn_id:
            ids.append(self.sql_conn_id)
        return ids


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat()


def _parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def endpoint_of(source: Source) -> Any:
    from airflow_provider_eh.hooks.event_hubs import EventHubsHook

    return EventHubsHook(source.event_hubs_conn_id, eventhub_name=source.eventhub_name).get_endpoint()


def partition_properties(source: Source) -> dict[str, dict[str, Any]]:
    """Per partition: last enqueued sequence number and time.

    The SDK opens a connection per management request, so the partitions are asked about from
    :data:`PROPERTY_CLIENTS` clients at once, each with a share of them.
    """
    from airflow_provider_eh.errors import ConnectionUnreachableError

    endpoint = endpoint_of(source)
    try:
        with endpoint.producer(retry_total=1) as client:
            partition_ids = [str(p) for p in client.get_eventhub_properties()["partition_ids"]]

        def share(ids: list[str]) -> dict[str, Any]:
            with endpoint.producer(retry_total=1) as own:
                return {pid: own.get_partition_properties(pid) for pid in ids}

        shares = [partition_ids[i::PROPERTY_CLIENTS] for i in range(PROPERTY_CLIENTS)]
        props: dict[str, Any] = {}
        with ThreadPoolExecutor(PROPERTY_CLIENTS) as pool:
            for part in pool.map(share, [s for s in shares if s]):
                props.update(part)
    except Exception as exc:
        raise ConnectionUnreachableError(
            source.event_hubs_conn_id,
            f"cannot read the partitions of Event Hub {endpoint.eventhub_name!r} on "
            f"{endpoint.fully_qualified_namespace}: {type(exc).__name__}: {exc}",
        ) from exc
    return {
        pid: {
            "last_enqueued_sequence_number": int(props[pid]["last_enqueued_sequence_number"]),
            "last_enqueued_time": _iso(props[pid].get("last_enqueued_time_utc")),
        }
        for pid in sorted(props, key=_partition_key)
    }


def _container(source: Source, name: str) -> Any:
    from airflow_provider_eh.hooks.blob import BlobStorageHook

    return BlobStorageHook(source.wasb_conn_id).get_container_client(name)


def producer_state_blobs(container: Any, namespace: str, hub: str) -> list[tuple[str, str, datetime | None]]:
    """``(group as stored in the path, partition, last modified)`` of every producer state of the hub: one listing."""
    prefix = f"{namespace}/{hub}/".lower()
    found = []
    for blob in container.list_blobs(name_starts_with=prefix):
        group, sep, partition = blob.name[len(prefix):].rpartition(PRODUCER_STATE)
        if sep and group and partition and "/" not in partition:
            found.append((group, partition, blob.last_modified))
    return found


def _summarise_state(state: Any, modified: datetime | None, now: datetime) -> dict[str, Any]:
    committed = sorted(state.committed.items(), key=lambda item: item[1].last_seq)
    last = None
    if committed:
        batch_id, record = committed[-1]
        last = {
            "batch_id": batch_id, "events": record.events, "first_seq": record.first_seq,
            "last_seq": record.last_seq, "committed_at": record.committed_at,
        }
    open_batches = []
    if state.pending:
        started = _parse_time(state.pending.started_at) or modified
        open_batches.append({
            "kind": "pending", "batch_id": state.pending.batch_id, "events": state.pending.events,
            "since": _iso(started), "age_seconds": None if started is None else round((now - started).total_seconds(), 1),
        })
    for batch_id, part in state.partial.items():
        open_batches.append({
            "kind": "partial", "batch_id": batch_id, "events": part.events, "since": _iso(modified),
            "age_seconds": None if modified is None else round((now - modified).total_seconds(), 1),
        })
    return {
        "partition": state.partition,
        "owner_level": state.owner_level,
        "next_sequence_number": state.last_published_seq + 1,
        "committed_batches": len(state.committed),
        "last_committed": last,
        "open_batches": open_batches,
        "updated": _iso(modified),
    }


def producer_groups(source: Source, now: datetime | None = None) -> list[dict[str, Any]]:
    """Producer groups of the hub in ``state_container`` (Blob backend), each with its partitions' ledgers."""
    from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
    from airflow_provider_eh.publishing.state import StateKey

    if not source.state_container:
        return []
    now = now or datetime.now(timezone.utc)
    endpoint = endpoint_of(source)
    container = _container(source, source.state_container)
    store = BlobProducerStateStore(container)
    blobs = producer_state_blobs(container, endpoint.namespace, endpoint.eventhub_name)

    def read(item: tuple[str, str, datetime | None]) -> tuple[str, dict[str, Any]]:
        group, partition, modified = item
        key = StateKey(endpoint.namespace, endpoint.eventhub_name.lower(), group, partition)
        try:
            state = store.read(key)
        except Exception as exc:  # one unreadable ledger must not hide the others
            return group, {"partition": partition, "error": f"{type(exc).__name__}: {exc}"}
        if state is None:
            return group, {"partition": partition, "error": "state blob vanished while reading"}
        return state.group, _summarise_state(state, modified, now)

    with ThreadPoolExecutor(READ_THREADS) as pool:
        results = list(pool.map(read, blobs))
    groups: dict[str, list[dict[str, Any]]] = {}
    for group, row in results:
        groups.setdefault(group, []).append(row)
    return [
        {"group": group, "partitions": sorted(rows, key=lambda r: _partition_key(r["partition"]))}
        for group, rows in sorted(groups.items())
    ]


def _partition_key(partition_id: str) -> tuple[int, int | str]:
    return (0, int(partition_id)) if str(partition_id).isdigit() else (1, str(partition_id))


def discover_consumer_groups(container: Any, fully_qualified_namespace: str, hub: str) -> list[str]:
    """Consumer groups with checkpoint or ownership blobs of the hub (any SDK's spelling of the namespace)."""
    from airflow_provider_eh.checkpoints.blob_layout import namespace_spellings

    groups: set[str] = set()
    for namespace in namespace_spellings(fully_qualified_namespace):
        for spelled in {f"{namespace}/{hub}/", f"{namespace}/{hub}/".lower()}:
            for blob in container.list_blobs(name_starts_with=spelled):
                parts = blob.name[len(spelled):].split("/")
                if len(parts) == 3 and parts[1].lower() in ("checkpoint", "ownership"):
                    groups.add(parts[0])
    return sorted(groups, key=str.lower)


def consumer_groups(source: Source, props: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per consumer group and partition: checkpointed and last enqueued sequence numbers, lag in events and time."""
    from airflow_provider_eh.checkpoints.blob_layout import CheckpointReader

    if not source.checkpoint_container:
        return []
    endpoint = endpoint_of(source)
    container = _container(source, source.checkpoint_container)
    names = list(source.consumer_groups) or discover_consumer_groups(
        container, endpoint.fully_qualified_namespace, endpoint.eventhub_name
    )
    reader = CheckpointReader(container, endpoint.fully_qualified_namespace, endpoint.eventhub_name)
    seen: set[str] = set()
    out = []
    for name in names:
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        read = reader.read(name)
        rows = []
        for pid in sorted(props, key=_partition_key):
            last = props[pid]["last_enqueued_sequence_number"]
            checkpoint = read.checkpoints.get(pid)
            seq = checkpoint.sequence_number if checkpoint else None
            lag = last - (seq if seq is not None else -1)
            last_time = _parse_time(props[pid].get("last_enqueued_time"))
            cp_time = checkpoint.last_modified if checkpoint else None
            lag_seconds = 0.0
            if lag > 0 and last_time is not None:
                lag_seconds = max(0.0, (last_time - cp_time).total_seconds()) if cp_time else None
            owner = read.ownership.get(pid)
            rows.append({
                "partition": pid, "checkpointed": seq, "last_enqueued": last, "lag_events": max(lag, 0),
                "lag_seconds": None if lag_seconds is None else round(lag_seconds, 1),
                "checkpointed_at": _iso(cp_time), "owner": owner.owner_id if owner else None,
            })
        out.append({"consumer_group": read.consumer_group, "partitions": rows})
    return out


def dead_letters(source: Source) -> dict[str, Any] | None:
    """Dead letters of the configured SQL sink by reason, and the command that replays them."""
    from airflow.sdk import BaseHook

    from airflow_provider_eh.ingest.schema import DEFAULT_PREFIX
    from airflow_provider_eh.ingest.store import SqlIngestStore, Stream

    if not source.sql_conn_id:
        return None
    endpoint = endpoint_of(source)
    prefix = source.sink_prefix or DEFAULT_PREFIX
    conn = BaseHook.get_connection(source.sql_conn_id).get_hook().get_conn()
    store = SqlIngestStore(conn, Stream(endpoint.namespace, endpoint.eventhub_name, source.sink_consumer_group),
                           prefix=prefix, create_tables=False)
    try:
        letters = store.dead_letters(status="dead")
    finally:
        store.close()
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


def task_instance_links(batches: Iterable[tuple[str, str]], limit: int = 2000) -> dict[str, dict[str, Any]]:
    """``batch id -> {dag_id, task_id, run_id, map_index, interval_start, interval_end}`` of the publishing
    task instances that derive it, among the ``limit`` latest task instances of the provider's publish operators.

    The ledger stores only the derived batch id; the task instance is found by deriving the id of each
    recent publishing task instance for the ledger's producer groups (and the default group ``dag.task``).
    """
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_provider_eh.publishing.batch_id import derive_batch_id

    wanted = dict(batches)  # batch id -> group
    if not wanted:
        return {}
    groups = set(wanted.values())
    found: dict[str, dict[str, Any]] = {}
    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.dag_id, TaskInstance.task_id, TaskInstance.run_id, TaskInstance.map_index,
                   DagRun.data_interval_start, DagRun.data_interval_end, DagRun.logical_date)
            .join(DagRun, (DagRun.dag_id == TaskInstance.dag_id) & (DagRun.run_id == TaskInstance.run_id))
            .where(TaskInstance.operator.in_(PUBLISH_OPERATORS))
            .order_by(TaskInstance.start_date.desc().nullslast())
            .limit(limit)
        ).all()
    for dag_id, task_id, run_id, map_index, start, end, logical in rows:
        for group in groups | {f"{dag_id}.{task_id}"}:
            batch_id = derive_batch_id(group, dag_id, task_id, interval_start=start, interval_end=end,
                                       logical_date=logical, run_id=run_id, map_index=map_index if map_index is not None else -1)
            if batch_id in wanted and batch_id not in found:
                found[batch_id] = {
                    "dag_id": dag_id, "task_id": task_id, "run_id": run_id, "map_index": map_index,
                    "interval_start": _iso(start), "interval_end": _iso(end),
                }
    return found


PUBLISH_OPERATORS = ("EventHubPublishOperator", "SparkToEventHubOperator")
