"""Azure Blob clients from a ``wasb`` connection, the type users already have for Azure Blob storage.

The fields are those of the Azure provider's ``wasb`` connection, so an existing connection works
unchanged, with or without that provider installed. The type stays the Azure provider's: this
package does not register ``wasb`` (Airflow would then route every ``wasb`` connection's form, hook
and connection test here), it only reads such connections. Credentials are tried in one fixed,
logged order:

1. ``connection_string`` (extra, secret) — also Azurite's;
2. ``tenant_id`` + login (client id) + password (client secret): ``ClientSecretCredential``;
3. ``sas_token`` (extra, secret) with the account URL (host, or ``https://<login>.blob.core.windows.net``),
   or a full SAS URL in ``sas_token``;
4. ``shared_access_key`` (extra) or password as the account key, with the account URL;
5. ``DefaultAzureCredential`` with the account URL.

Every blob consumer in the package (producer state, checkpoints, ownership) goes through this hook.

The network path takes the ``azure_event_hubs`` connection's field names: ``proxy_host``,
``proxy_port``, ``proxy_username``, ``proxy_password`` (an HTTP proxy) and ``ca_bundle`` (a PEM file of
CAs to trust); the Azure provider's ``proxies`` extra (``{"https": "http://user:pass@host:port"}``) is
read too, and the fields win over it.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_eh.client.network import NetworkOptions
from airflow_provider_eh.errors import ConnectionConfigError, ConnectionUnreachableError
from airflow_provider_eh.hooks._connection import extra_field, masked

if TYPE_CHECKING:
    from azure.storage.blob import BlobServiceClient, ContainerClient
    from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
    from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

CONN_TYPE = "wasb"


class _BlobConnection:
    """Connection handling shared by the sync and async hooks."""

    conn_name_attr = "wasb_conn_id"
    default_conn_name = "wasb_default"
    conn_type = CONN_TYPE
    hook_name = "Azure Blob Storage"

    wasb_conn_id: str
    log: Any

    def _network_kwargs(self, conn: Any) -> dict[str, Any]:
        """The blob clients' proxy and CA arguments from the connection (see the module docstring)."""
        extras = conn.extra_dejson or {}
        fields = {name: extra_field(extras, CONN_TYPE, name)
                  for name in ("proxy_host", "proxy_port", "proxy_username", "proxy_password", "ca_bundle")}
        try:
            network = NetworkOptions.from_fields(fields)
        except ValueError as exc:
            raise ConnectionConfigError(self.wasb_conn_id, str(exc)) from None
        kwargs: dict[str, Any] = {}
        proxies = extra_field(extras, CONN_TYPE, "proxies")
        if network.proxy_host:
            from urllib.parse import quote

            user = ""
            if network.proxy_username:
                password = quote(masked(network.proxy_password) or "", safe="")
                masked(password)  # as it stands in the proxy URL, which the HTTP library may show in an error
                user = f"{quote(network.proxy_username, safe='')}:{password}@"
            url = f"http://{user}{network.proxy_host}:{network.proxy_port}"
            kwargs["proxies"] = {"http": url, "https": url}
        elif proxies:
            if not isinstance(proxies, dict):
                raise ConnectionConfigError(self.wasb_conn_id, "field 'proxies' must be an object such as "
                                                               '{"https": "http://host:port"}')
            for url in proxies.values():
                masked(str(url))  # it may carry a password
            kwargs["proxies"] = dict(proxies)
        if network.ca_bundle:
            kwargs["connection_verify"] = network.ca_bundle
        return kwargs

    def _service_kwargs(self, conn: Any, *, aio: bool) -> tuple[str, dict[str, Any]]:
        """``(how, kwargs)`` where ``kwargs`` build a BlobServiceClient; ``how`` names the credential used."""
        extras = conn.extra_dejson or {}
        conn_id = self.wasb_conn_id
        conn_str = masked(extra_field(extras, CONN_TYPE, "connection_string"))
        if conn_str:
            for part in conn_str.split(";"):
                name, _, value = part.partition("=")
                if name.strip().lower() in ("accountkey", "sharedaccesssignature"):
                    masked(value.strip())
            return "connection_string", {"conn_str": conn_str}

        login = conn.login or ""
        account_url = (conn.host or "").strip()
        if account_url and "://" not in account_url:
            account_url = f"https://{account_url}"
        if not account_url and login:
            account_url = f"https://{login}.blob.core.windows.net/"

        tenant_id = extra_field(extras, CONN_TYPE, "tenant_id")
        if tenant_id and login and conn.password:
            if not account_url:
                raise ConnectionConfigError(conn_id, "a client secret needs the account URL in the host field")
            masked(conn.password)
            if aio:
                from azure.identity.aio import ClientSecretCredential
            else:
                from azure.identity import ClientSecretCredential  # type: ignore[assignment]
            return "client_secret", {
                "account_url": account_url,
                "credential": ClientSecretCredential(tenant_id, login, conn.password),
            }

        sas_token = masked(extra_field(extras, CONN_TYPE, "sas_token"))
        if sas_token:
            if sas_token.startswith("http"):
                return "sas_url", {"account_url": sas_token}
            if not account_url:
                raise ConnectionConfigError(
                    conn_id, "field 'sas_token' needs the account URL in host or the account name in login"
                )
            return "sas_token", {"account_url": f"{account_url.rstrip('/')}/?{sas_token.lstrip('?')}"}

        key = masked(extra_field(extras, CONN_TYPE, "shared_access_key") or conn.password)
        if not account_url:
            raise ConnectionConfigError(
                conn_id,
                "set 'connection_string', or the account URL (host) or account name (login) with a key, "
                "SAS token, client secret or DefaultAzureCredential",
            )
        if key:
            return "account_key", {"account_url": account_url, "credential": key}
        if aio:
            from azure.identity.aio import DefaultAzureCredential
        else:
            from azure.identity import DefaultAzureCredential  # type: ignore[assignment]
        return "default_azure_credential", {
            "account_url": account_url,
            "credential": DefaultAzureCredential(
                managed_identity_client_id=extra_field(extras, CONN_TYPE, "managed_identity_client_id")
            ),
        }

    def _unreachable(self, exc: BaseException, what: str) -> ConnectionUnreachableError:
        return ConnectionUnreachableError(
            self.wasb_conn_id, f"{what} failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        )


class BlobStorageHook(_BlobConnection, BaseHook):
    """
    Sync Azure Blob clients from a ``wasb`` connection.

    :param wasb_conn_id: the Airflow connection id.
    """

    def __init__(self, wasb_conn_id: str = _BlobConnection.default_conn_name):
        super().__init__()
        self.wasb_conn_id = wasb_conn_id

    @cached_property
    def service_client(self) -> BlobServiceClient:
        """The account's BlobServiceClient, built once per hook."""
        from azure.storage.blob import BlobServiceClient

        conn = self.get_connection(self.wasb_conn_id)
        how, kwargs = self._service_kwargs(conn, aio=False)
        network = self._network_kwargs(conn)
        self.log.info("Blob connection %s: using %s%s", self.wasb_conn_id, how,
                      " through a proxy" if "proxies" in network else "")
        if "conn_str" in kwargs:
            return BlobServiceClient.from_connection_string(kwargs["conn_str"], **network)
        return BlobServiceClient(**kwargs, **network)

    def get_container_client(self, container: str) -> ContainerClient:
        return self.service_client.get_container_client(container)

    def ensure_container(self, container: str) -> ContainerClient:
        """The container's client, creating the container when it does not exist yet."""
        from azure.core.exceptions import ResourceExistsError

        client = self.get_container_client(container)
        try:
            client.create_container()
        except ResourceExistsError:
            pass
        except Exception as exc:
            raise self._unreachable(exc, f"creating container {container!r}") from exc
        return client

    def test_connection(self) -> tuple[bool, str]:
        """One cheap real call: read the account's service properties."""
        try:
            self.service_client.get_service_properties()
        except Exception as exc:
            return False, str(self._unreachable(exc, "reading the account's service properties"))
        return True, f"Blob account {self.service_client.account_name!r} reachable"


class BlobStorageAsyncHook(_BlobConnection, BaseHook):
    """
    Async twin of :class:`BlobStorageHook`, for triggers.

    :param wasb_conn_id: the Airflow connection id.
    """

    def __init__(self, wasb_conn_id: str = _BlobConnection.default_conn_name):
        super().__init__()
        self.wasb_conn_id = wasb_conn_id
        self._service: AsyncBlobServiceClient | None = None

    async def get_service_client(self) -> AsyncBlobServiceClient:
        if self._service is None:
            from azure.storage.blob.aio import BlobServiceClient

            conn = await self.aget_connection(self.wasb_conn_id)
            how, kwargs = self._service_kwargs(conn, aio=True)
            network = self._network_kwargs(conn)
            self.log.info("Blob connection %s: using %s%s", self.wasb_conn_id, how,
                          " through a proxy" if "proxies" in network else "")
            if "conn_str" in kwargs:
                self._service = BlobServiceClient.from_connection_string(kwargs["conn_str"], **network)
            else:
                self._service = BlobServiceClient(**kwargs, **network)
        return self._service

    async def get_container_client(self, container: str) -> AsyncContainerClient:
        return (await self.get_service_client()).get_container_client(container)

    async def close(self) -> None:
        if self._service is not None:
            await self._service.close()
            self._service = None
