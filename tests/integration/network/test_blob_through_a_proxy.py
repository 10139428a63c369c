"""Blob storage through an HTTP proxy: the ``wasb`` connection's proxy fields reach the sync and async blob clients."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_eh.errors import ConnectionConfigError
from airflow_provider_eh.hooks.blob import BlobStorageAsyncHook, BlobStorageHook
from tests.support.proxy import HttpProxy
from tests.conftest import connection_env, unique_name


def test_the_blob_hooks_go_through_the_connections_proxy(azurite: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    container = unique_name("proxied")
    with HttpProxy(tmp_path / "proxy", "svc", "blob-pr0xy") as proxy:
        monkeypatch.setenv(*connection_env("wasb_proxied", "wasb", extra={
            "connection_string": azurite.connection_string, "proxy_host": "127.0.0.1", "proxy_port": proxy.port,
            "proxy_username": "svc", "proxy_password": "blob-pr0xy",
        }))
        hook = BlobStorageHook("wasb_proxied")
        ok, message = hook.test_connection()
        assert ok, message
        hook.ensure_container(container).upload_blob("state", b"{}")
        hook.service_client.close()

        async def listed() -> list[str]:
            async_hook = BlobStorageAsyncHook("wasb_proxied")
            try:
                client = await async_hook.get_container_client(container)
                return [b.name async for b in client.list_blobs()]
            finally:
                await async_hook.close()

        assert asyncio.run(listed()) == ["state"]
        # the proxy logs each connection it carried by its first request: the sync client's connection
        # test, then the async client's listing
        carried = proxy.requests(at_least=2)
        assert {target for _, target, _ in carried} == {f"127.0.0.1:{azurite.port}"}
        paths = [(method, path) for method, _, path in carried]
        assert ("GET", "/devstoreaccount1/?restype=service&comp=properties") in paths
        assert ("GET", f"/devstoreaccount1/{container}?restype=container&comp=list") in paths
        assert proxy.refused() == 0


def test_a_bad_proxy_field_on_a_blob_connection_names_it(azurite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(*connection_env("wasb_bad_proxy", "wasb", extra={
        "connection_string": azurite.connection_string, "proxy_host": "127.0.0.1"}))
    with pytest.raises(ConnectionConfigError, match="wasb_bad_proxy.*'proxy_port' is empty"):
        BlobStorageHook("wasb_bad_proxy").service_client  # noqa: B018
