"""Producer ledgers as the view shows them: each group's partitions, their open batches, a partition's history.

Producer states are decoded by the state store's public ``decode`` and histories read through its
``history`` (the same decoding and checks as the engine); the view never writes. A state blob is
downloaded only when its ETag in the hub's listing differs from the one read before: the decoded
states are kept in the API server (:data:`CACHED_STATES` of them), so an answer for a hub whose
ledgers did not move costs one listing, however many partitions and producer groups it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, NamedTuple

from airflow_provider_eh.errors import EventHubsProviderError, ViewReadError
from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.readers.reading import CONTAINER_HINT, Reading, iso, partition_sort_key, read_failure
from airflow_provider_eh.plugins.redaction import failure
from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
from airflow_provider_eh.publishing.document import StateKey
from airflow_provider_eh.publishing.open_batches import is_stale as is_stale  # the view's rule is the health check's
from airflow_provider_eh.publishing.open_batches import open_batches as find_open_batches

PRODUCER_STATE = "/producer-state/"
BACKENDS = ("blob", "variable")
READ_THREADS = 16
CACHED_STATES = 65536

#: (account url, container, blob name) -> (ETag, decoded state): a state is downloaded again only when its ETag moved
_STATES = Cache(None, CACHED_STATES)


class StateBlob(NamedTuple):
    """One producer state in a listing: its group as stored in the path, partition, last modified time and ETag."""

    group: str
    partition: str
    modified: datetime | None
    etag: str | None = None


def producer_state_blobs(container: Any, namespace: str, hub: str) -> list[StateBlob]:
    """Every producer state of the hub: one listing."""
    prefix = f"{namespace}/{hub}/".lower()
    found = []
    for blob in container.list_blobs(name_starts_with=prefix):
        group, sep, partition = blob.name[len(prefix):].rpartition(PRODUCER_STATE)
        if sep and group and partition and "/" not in partition:
            found.append(StateBlob(group, partition, blob.last_modified, bare_etag(getattr(blob, "etag", None))))
    return found


def bare_etag(etag: str | None) -> str | None:
    """An ETag without the quotes a download's header has and a listing's entry has not."""
    return etag.strip('"') or None if etag else None


def read_state(container: Any, store: Any, key: Any, etag: str | None) -> Any:
    """The producer state of ``key`` (``None`` once gone): the one kept when the listing's ``etag`` is the one it was
    downloaded with, else downloaded (with its own ETag, so a state that moved after the listing is read again
    next time) and decoded by ``store``."""
    from azure.core.exceptions import ResourceNotFoundError

    cache_key = (str(getattr(container, "url", "")), str(getattr(container, "container_name", "")), key.blob_name)
    hit, kept = _STATES.peek(cache_key)
    if hit and etag is not None and kept[0] == etag:
        return kept[1]
    try:
        download = container.get_blob_client(key.blob_name).download_blob()
        text = download.readall()
    except ResourceNotFoundError:
        return None
    state = store.decode(key, text)
    read_etag = bare_etag(getattr(getattr(download, "properties", None), "etag", None))
    if read_etag:
        _STATES.put(cache_key, (read_etag, state))
    return state


def read_states(reading: Reading, container: Any, store: Any, blobs: Iterable[StateBlob],
                threads: int = READ_THREADS) -> list[tuple[StateBlob, Any, BaseException | None]]:
    """``(blob, state or None, the error reading it or None)`` of each of ``blobs``, in order, read ``threads`` at a
    time (only those whose ETag moved since they were last read)."""
    endpoint = reading.endpoint

    def read(blob: StateBlob) -> tuple[StateBlob, Any, BaseException | None]:
        try:
            return blob, read_state(container, store, StateKey.of(endpoint, blob.group, blob.partition), blob.etag), None
        except Exception as exc:  # one unreadable ledger must not hide the others
            return blob, None, exc

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(read, blobs))


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
    open_batches = [
        {"kind": batch.kind, "batch_id": batch.batch_id, "events": batch.events,
         **({} if batch.landed is None else {"landed": batch.landed}),
         "since": iso(batch.since), "age_seconds": batch.age_seconds(now), "origin": batch.origin}
        for batch in find_open_batches(state, modified)
    ]
    return {
        "partition": state.partition,
        "owner_level": state.owner_level,
        "next_sequence_number": state.last_published_seq + 1,
        "committed_batches": state.committed_count,
        "last_committed": last,
        "open_batches": open_batches,
        "updated": iso(modified),
    }


def group_ledgers(rows: Iterable[tuple[str, dict[str, Any]]], backend: str | None = None) -> list[dict[str, Any]]:
    """``(group, partition row)`` pairs as groups in name order, each with its partitions in partition order
    (and its ``backend`` when given)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for group, row in rows:
        groups.setdefault(group, []).append(row)
    return [
        {"group": group, **({"backend": backend} if backend else {}),
         "partitions": sorted(found, key=lambda r: partition_sort_key(r["partition"]))}
        for group, found in sorted(groups.items())
    ]


def producer_groups(reading: Reading, now: datetime | None = None,
                    may_read_variable: Callable[[str], bool] | None = None) -> list[dict[str, Any]]:
    """Producer groups of the hub, each with its partitions' ledgers: those in ``state_container`` (Blob
    backend, ``"backend": "blob"``) and, when ``may_read_variable`` is given, those in Airflow Variables
    that it allows (``"backend": "variable"``); a group in both is shown twice."""
    now = now or datetime.now(UTC)
    groups = group_ledgers(_blob_ledgers(reading, now), "blob")
    if may_read_variable is not None:
        groups += group_ledgers(_variable_ledgers(reading, now, may_read_variable), "variable")
    return sorted(groups, key=lambda g: (g["group"], g["backend"]))


def blob_states(reading: Reading) -> tuple[Any, Any, list[StateBlob]] | None:
    """The source's state container, a store reading it and the hub's producer states in it; ``None`` without a
    state container. A failed listing names the container."""
    source = reading.source
    if not source.state_container:
        return None
    endpoint = reading.endpoint
    container = reading.container(source.state_container)
    try:
        blobs = producer_state_blobs(container, endpoint.namespace, endpoint.eventhub_name)
    except Exception as exc:
        raise read_failure(
            f"listing producer states in container {source.state_container!r} (connection {source.wasb_conn_id!r})", exc,
            reading.blob_site(source.state_container, "state_container", "producer state"), CONTAINER_HINT,
        ) from None
    return container, BlobProducerStateStore(container), blobs


def _blob_ledgers(reading: Reading, now: datetime) -> list[tuple[str, dict[str, Any]]]:

    found = blob_states(reading)
    if found is None:
        return []
    container, store, blobs = found
    endpoint = reading.endpoint
    rows = []
    for blob, state, exc in read_states(reading, container, store, blobs):
        if isinstance(exc, EventHubsProviderError):  # the package's own words: which blob, what is wrong with it
            rows.append((blob.group, {"partition": blob.partition, "error": f"{type(exc).__name__}: {exc}"}))
        elif exc is not None:
            name = StateKey.of(endpoint, blob.group, blob.partition).blob_name
            rows.append((blob.group, {"partition": blob.partition, "error": failure(f"reading {name}", exc, "").message}))
        elif state is None:
            rows.append((blob.group, {"partition": blob.partition, "error": "state blob vanished while reading"}))
        else:
            rows.append((state.group, summarise_state(state, blob.modified, now)))
    return rows


def _variable_ledgers(reading: Reading, now: datetime, may_read: Callable[[str], bool]) -> list[tuple[str, dict[str, Any]]]:
    """The hub's ledgers kept in Airflow Variables (one query for the keys, one for the documents)."""
    from airflow_provider_eh.plugins.readers.variables import hub_states, store_of

    endpoint = reading.endpoint
    try:
        states = hub_states(endpoint.namespace, endpoint.eventhub_name, may_read)
    except Exception as exc:
        raise failure("reading producer states in Airflow Variables", exc,
                      "Check the API server's metadata database and Fernet key.") from None
    store = store_of(states)
    rows = []
    for state in states:
        try:
            decoded = store.decode(StateKey.of(endpoint, state.group, state.partition), state.text)
        except EventHubsProviderError as exc:
            rows.append((state.group, {"partition": state.partition, "error": f"{type(exc).__name__}: {exc}"}))
            continue
        rows.append((decoded.group, summarise_state(decoded, None, now)))
    return rows


def ledger_history(reading: Reading, group: str, partition: str, before: int | None, limit: int,
                   backend: str = "blob") -> dict[str, Any]:
    """One page of a partition's committed batches, newest first (the ledger's history records, read by
    ordinal: a page costs ``limit`` small reads however long the history)."""
    source = reading.source
    endpoint = reading.endpoint
    key = StateKey.of(endpoint, group, partition)
    if backend == "variable":
        from airflow_provider_eh.plugins.readers.variables import store_of

        try:
            page = store_of(()).history(key, before=before, limit=limit)
        except EventHubsProviderError as exc:
            raise ViewReadError(f"{type(exc).__name__}: {exc}", 502) from None
        except Exception as exc:
            raise failure(f"reading the ledger history of {key} in Airflow Variables", exc,
                          "Check the API server's metadata database and Fernet key.") from None
        return _history_page(group, partition, page)
    if not source.state_container:
        raise ViewReadError("the ledger's history is read from the state container: name state_container", 400)
    store = BlobProducerStateStore(reading.container(source.state_container))
    try:
        page = store.history(key, before=before, limit=limit)
    except EventHubsProviderError as exc:  # the package's own words: which record, what is wrong with it
        raise ViewReadError(f"{type(exc).__name__}: {exc}", 502) from None
    except Exception as exc:
        raise read_failure(f"reading the ledger history of {key}", exc,
                           reading.blob_site(source.state_container, "state_container", "producer state"),
                           CONTAINER_HINT) from None
    return _history_page(group, partition, page)


def _history_page(group: str, partition: str, page: Any) -> dict[str, Any]:
    return {
        "group": group, "partition": partition, "total": page.total, "before": page.before,
        "batches": [{**committed_row(r), "ordinal": r.ordinal} for r in page.batches],
    }
