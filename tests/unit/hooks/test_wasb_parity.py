"""Every form of a ``wasb`` connection reaches the same account with the same credential as the Azure provider's
``WasbHook`` (and ``WasbAsyncHook``) gives it: account URL, account name, the credential's type and its secret.

Both hooks build their clients from the same connection (no request is made); the Azure provider is
installed by requirements/dev.lock, so a missing provider fails here rather than skipping. Where this
package parts from ``WasbHook`` on purpose (the module docstring of ``hooks/blob_connection.py`` says why), the
last tests pin what it does instead.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from airflow.providers.microsoft.azure.hooks.wasb import WasbAsyncHook, WasbHook

from airflow_provider_eh.errors import ConnectionConfigError
from airflow_provider_eh.hooks.blob import BlobStorageAsyncHook, BlobStorageHook

KEY = "c2VjcmV0LWtleS12YWx1ZQ=="
OTHER_KEY = "b3RoZXIta2V5LXZhbHVl"
SAS = "sv=2024-08-04&ss=b&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=c2lnbmF0dXJl"
URL = "https://acct.blob.core.windows.net/"

FORMS: dict[str, dict[str, Any]] = {
    "connection string with an account key": {"extra": {
        "connection_string": f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={KEY};EndpointSuffix=core.windows.net"}},
    "connection string with a SAS": {"extra": {
        "connection_string": f"BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature={SAS}"}},
    "connection string of Azurite": {"extra": {"connection_string": "UseDevelopmentStorage=true"}},
    "account URL and key as password": {"host": URL, "password": KEY},
    "account name as login and key as password": {"login": "acct", "password": KEY},
    "account DNS name without scheme and shared_access_key": {"host": "acct.blob.core.windows.net",
                                                              "extra": {"shared_access_key": KEY}},
    "account key in the account_key extra": {"host": URL, "extra": {"account_key": KEY}},
    "SAS token with the account URL": {"host": URL, "extra": {"sas_token": SAS}},
    "SAS token with the account name": {"login": "acct", "extra": {"sas_token": SAS}},
    "SAS URL": {"extra": {"sas_token": f"{URL}?{SAS}"}},
    "SAS token in a prefixed extra of an older form": {"host": URL, "extra": {"extra__wasb__sas_token": SAS}},
    "shared_access_key before sas_token": {"host": URL, "extra": {"shared_access_key": KEY, "sas_token": SAS}},
    "sas_token before the password": {"host": URL, "password": KEY, "extra": {"sas_token": SAS}},
    "password before the account_key extra": {"host": URL, "password": KEY, "extra": {"account_key": OTHER_KEY}},
    "service principal": {"host": URL, "login": "client-id", "password": "client-secret",
                          "extra": {"tenant_id": "tenant-id"}},
    "service principal before a key": {"host": URL, "login": "client-id", "password": "client-secret",
                                       "extra": {"tenant_id": "tenant-id", "shared_access_key": KEY}},
    "DefaultAzureCredential": {"host": URL},
    "DefaultAzureCredential of a workload identity": {"host": URL, "extra": {
        "managed_identity_client_id": "mi-client", "workload_identity_tenant_id": "wi-tenant"}},
}


def _set(monkeypatch: pytest.MonkeyPatch, conn_id: str, fields: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "wasb", **fields}))


def _resolved(client: Any) -> dict[str, Any]:
    """What a BlobServiceClient reaches and signs with: URL (with a SAS in it), account, credential and its secret."""
    credential = client.credential
    secret = getattr(credential, "account_key", None) or getattr(credential, "signature", None)
    return {"url": client.url, "account": client.account_name, "credential": type(credential).__name__,
            "secret": secret.lstrip("?") if isinstance(secret, str) else secret}


@pytest.mark.parametrize("form", list(FORMS))
def test_each_form_resolves_as_wasb_hook_resolves_it(monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    _set(monkeypatch, "blob_parity", FORMS[form])
    ours = _resolved(BlobStorageHook("blob_parity").service_client)
    assert ours == _resolved(WasbHook("blob_parity").get_conn())
    assert ours["credential"] != "NoneType" or "SAS" in form or "connection string" in form  # a credential was chosen


@pytest.mark.parametrize("form", list(FORMS))
def test_each_form_resolves_as_the_async_wasb_hook_resolves_it(monkeypatch: pytest.MonkeyPatch, form: str) -> None:
    _set(monkeypatch, "blob_parity", FORMS[form])

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        ours_hook, theirs_hook = BlobStorageAsyncHook("blob_parity"), WasbAsyncHook("blob_parity")
        ours, theirs = await ours_hook.get_service_client(), await theirs_hook.get_async_conn()
        try:
            return _resolved(ours), _resolved(theirs)
        finally:
            await ours.close()
            await theirs.close()

    ours, theirs = asyncio.run(both())
    assert ours == theirs


def test_a_service_principal_missing_its_secret_or_account_url_is_refused_naming_what_to_set(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "blob_sp", {"host": URL, "login": "client-id", "extra": {"tenant_id": "t"}})
    with pytest.raises(ConnectionConfigError, match="Connection 'blob_sp': field 'tenant_id' selects a service principal"):
        BlobStorageHook("blob_sp").service_client  # noqa: B018
    _set(monkeypatch, "blob_sp", {"login": "client-id", "password": "s", "extra": {"tenant_id": "t"}})
    with pytest.raises(ConnectionConfigError, match="a service principal needs the account URL in the host field"):
        BlobStorageHook("blob_sp").service_client  # noqa: B018


def test_a_managed_identity_client_id_alone_selects_that_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, "blob_mi", {"host": URL, "extra": {"managed_identity_client_id": "mi-client"}})
    hook = BlobStorageHook("blob_mi")
    how, kwargs = hook._service_kwargs(hook.get_connection("blob_mi"), aio=False)
    assert how == "default_azure_credential"
    managed = [c for c in kwargs["credential"].credentials if type(c).__name__ == "ManagedIdentityCredential"]
    assert managed and "mi-client" in repr(vars(managed[0]._credential))


def test_a_local_emulators_address_and_its_http_sas_url_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    local = "http://localhost:10000/devstoreaccount1"
    _set(monkeypatch, "blob_local", {"host": local, "login": "devstoreaccount1", "password": KEY})
    assert BlobStorageHook("blob_local").service_client.url.startswith("http://localhost:10000/devstoreaccount1")
    _set(monkeypatch, "blob_local_sas", {"extra": {"sas_token": f"{local}?{SAS}"}})
    client = BlobStorageHook("blob_local_sas").service_client
    assert client.url.startswith(local) and "sig=c2lnbmF0dXJl" in client.url
