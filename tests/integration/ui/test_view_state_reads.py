"""The view downloads a producer state only when its ETag in Azurite's listing moved since it was read.

Against real Azurite: the listing's ETags and the download's are the same ETag written two ways (the
download's header is quoted), so a state that did not move is the one decoded before (the same object,
no download), and a state written since is downloaded and decoded again.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_provider_eh.plugins.readers.ledgers import _STATES, producer_state_blobs, read_state
from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from tests.conftest import connection_env

NAMESPACE, HUB = "view-cache.servicebus.windows.net", "orders"


def _write(container: Any, key: StateKey, owner_level: int) -> None:
    state = ProducerState.new(key)
    state.owner_level = owner_level
    container.upload_blob(key.blob_name, state.to_json(), overwrite=True)


def _listed(container: Any) -> dict[tuple[str, str], str | None]:
    return {(b.group, b.partition): b.etag for b in producer_state_blobs(container, NAMESPACE, HUB)}


def test_a_state_is_downloaded_again_only_when_its_etag_moved(azurite: Any, container: str) -> None:
    client = BlobServiceClient.from_connection_string(azurite.connection_string).get_container_client(container)
    store = BlobProducerStateStore(client)
    keys = [StateKey(NAMESPACE, HUB, "nightly", str(p)) for p in range(2)]
    for key in keys:
        _write(client, key, 1)
    _STATES.clear()

    listed = _listed(client)
    assert set(listed) == {("nightly", "0"), ("nightly", "1")} and all(listed.values())
    first = [read_state(client, store, k, listed[("nightly", k.partition)]) for k in keys]
    assert [s.owner_level for s in first] == [1, 1]
    again = [read_state(client, store, k, listed[("nightly", k.partition)]) for k in keys]
    assert again[0] is first[0] and again[1] is first[1]  # kept: the listing's ETag is the one downloaded

    _write(client, keys[1], 2)  # a publish moved partition 1's state
    moved = _listed(client)
    assert moved[("nightly", "0")] == listed[("nightly", "0")] and moved[("nightly", "1")] != listed[("nightly", "1")]
    now = [read_state(client, store, k, moved[("nightly", k.partition)]) for k in keys]
    assert now[0] is first[0]
    assert now[1] is not first[1] and now[1].owner_level == 2

    # a listing older than the state read: downloaded, never the kept one taken for newer
    stale = read_state(client, store, keys[1], listed[("nightly", "1")])
    assert stale.owner_level == 2
    # no ETag to compare (a listing that gave none): always downloaded
    assert read_state(client, store, keys[0], None) is not first[0]

    client.delete_blob(keys[0].blob_name)
    assert read_state(client, store, keys[0], "0x0") is None


def test_the_views_reads_of_many_states_at_once_keep_their_connections(
    azurite: Any, container: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The view downloads producer states 16 at a time beside its checkpoint reads: its blob client keeps that
    many connections, where the HTTP library's default pool (10) would open and throw one away per request
    beyond it, each with a "Connection pool is full" warning in the API server's log."""
    from airflow_provider_eh.hooks.blob import BlobStorageHook
    from airflow_provider_eh.plugins.readers.reading import BLOB_CONNECTIONS, Reading, Source

    monkeypatch.setenv(*connection_env("wasb_view_pool", "wasb", extra={"connection_string": azurite.connection_string}))
    monkeypatch.setenv(*connection_env("eh_view_pool", "azure_event_hubs", extra={
        "connection_string": f"Endpoint=sb://{NAMESPACE}/;SharedAccessKeyName=k;SharedAccessKey=secret;EntityPath={HUB}"}))
    seed = BlobServiceClient.from_connection_string(azurite.connection_string).get_container_client(container)
    keys = [StateKey(NAMESPACE, HUB, f"group-{g}", str(p)) for g in range(4) for p in range(16)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: _write(seed, key, 1), keys))

    def discarded(client: Any) -> list[str]:
        """The connections urllib3 threw away while 16 threads read every state three times."""
        _STATES.clear()
        seen: list[str] = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
        logger = logging.getLogger("urllib3.connectionpool")
        logger.addHandler(handler)
        try:
            store = BlobProducerStateStore(client)
            with ThreadPoolExecutor(16) as pool:
                states = list(pool.map(lambda key: read_state(client, store, key, None), keys * 3))
        finally:
            logger.removeHandler(handler)
        assert [s.owner_level for s in states] == [1] * len(keys) * 3
        return [message for message in seen if "Connection pool is full" in message]

    reading = Reading(Source("eh_view_pool", HUB, "wasb_view_pool", container, container))
    assert reading.blob_hook.pool_size == BLOB_CONNECTIONS
    assert discarded(reading.container(container)) == []
    # the same reads through a client with the default pool: what the view's own pool spares
    assert discarded(BlobStorageHook("wasb_view_pool").get_container_client(container))
