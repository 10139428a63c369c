"""The hooks reach the local Event Hubs endpoint and Azurite through AIRFLOW_CONN_* connections."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from airflow_provider_eh.errors import ConnectionUnreachableError, UnknownEventHubError
from airflow_provider_eh.hooks.blob import BlobStorageAsyncHook, BlobStorageHook
from airflow_provider_eh.hooks.event_hubs import EventHubAsyncHook, EventHubHook


def test_event_hubs_hook_reads_hub_and_partition_properties(connections: dict[str, str]) -> None:
    hook = EventHubHook(connections["event_hubs"])
    assert hook.get_partition_ids() == ["0", "1", "2", "3"]
    with hook.get_producer_client() as producer:
        batch = producer.create_batch(partition_id="2")
        batch.add(__import__("azure.eventhub", fromlist=["EventData"]).EventData(b"x"))
        producer.send_batch(batch)
    props = hook.get_partition_properties("2")
    assert props["last_enqueued_sequence_number"] == 0 and not props["is_empty"]
    assert hook.test_connection() == (True, f"Event Hub {connections['hub']!r} reachable with 4 partitions")


def test_async_event_hubs_hook_reads_the_same_properties(connections: dict[str, str]) -> None:
    async def read() -> tuple[list[str], dict]:
        hook = EventHubAsyncHook(connections["event_hubs"])
        return await hook.get_partition_ids(), await hook.get_partition_properties("0")

    ids, props = asyncio.run(read())
    assert ids == ["0", "1", "2", "3"] and props["is_empty"]


def test_unknown_hub_is_a_clear_error_naming_connection_and_hub(connections: dict[str, str]) -> None:
    hook = EventHubHook(connections["event_hubs"], eventhub_name="no-such-hub")
    with pytest.raises(UnknownEventHubError, match=r"Connection 'azure_event_hubs_default': reading the hub's properties "
                                                   r"failed: Event Hub 'no-such-hub' at .*: the Event Hub does not exist"):
        hook.get_partition_ids()
    ok, message = hook.test_connection()
    assert not ok and "no-such-hub" in message


def test_unreachable_endpoint_names_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from eventhubs_local.ports import free_port

    conn_str = f"Endpoint=sb://127.0.0.1:{free_port()};SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;EntityPath=h"
    monkeypatch.setenv("AIRFLOW_CONN_EH_NOWHERE", json.dumps({"conn_type": "azure_event_hubs", "extra": {"connection_string": conn_str}}))
    with pytest.raises(ConnectionUnreachableError, match="Connection 'eh_nowhere': reading the hub's properties failed: "
                                                         "Event Hub 'h' at 127.0.0.1:[0-9]+: the address refused the connection"):
        EventHubHook("eh_nowhere").get_partition_ids()


def test_blob_hook_creates_and_lists_through_the_wasb_connection(connections: dict[str, str]) -> None:
    hook = BlobStorageHook(connections["wasb"])
    assert hook.test_connection() == (True, "Blob account 'devstoreaccount1' reachable")
    container = hook.ensure_container("hooks-test")
    hook.ensure_container("hooks-test")  # idempotent
    container.upload_blob("a/b", b"1", overwrite=True)

    async def names() -> list[str]:
        async_hook = BlobStorageAsyncHook(connections["wasb"])
        try:
            client = await async_hook.get_container_client("hooks-test")
            return [b.name async for b in client.list_blobs()]
        finally:
            await async_hook.close()

    assert asyncio.run(names()) == ["a/b"]


def test_blob_hook_with_a_wrong_key_fails_naming_the_connection(azurite: object, monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = azurite.connection_string.replace("AccountKey=", "AccountKey=AAAA")  # type: ignore[attr-defined]
    monkeypatch.setenv("AIRFLOW_CONN_WASB_WRONG", json.dumps({"conn_type": "wasb", "extra": {"connection_string": wrong}}))
    ok, message = BlobStorageHook("wasb_wrong").test_connection()
    assert not ok and message.startswith("Connection 'wasb_wrong': reading the account's service properties failed")


def _airflow(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIRFLOW__CORE__TEST_CONNECTION": "Enabled"}
    return subprocess.run([sys.executable, "-m", "airflow", *args], capture_output=True, text=True, env=env, timeout=300)


def test_airflow_cli_lists_the_provider_and_tests_both_connections(airflow_db: object, connections: dict[str, str]) -> None:
    listed = _airflow("providers", "list")
    assert "airflow-provider-eh" in listed.stdout, listed.stderr
    for conn_id in (connections["event_hubs"], connections["wasb"]):
        result = _airflow("connections", "test", conn_id)
        assert "Connection success!" in result.stdout, result.stdout + result.stderr
