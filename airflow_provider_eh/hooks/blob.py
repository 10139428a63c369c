"""Azure Blob clients from a ``wasb`` connection, the type users already have for Azure Blob storage.

The fields are those of the Azure provider's ``wasb`` connection, so an existing connection works
unchanged, with or without that provider installed. The type stays the Azure provider's: this
package does not register ``wasb`` (Airflow would then route every ``wasb`` connection's form, hook
and connection test here), it only reads such connections; how a connection resolves to an account
and a credential (the same as ``WasbHook``'s) is :mod:`~airflow_provider_eh.hooks.blob_connection`.

Every blob consumer in the package (producer state, checkpoints, ownership) goes through this hook.
"""
from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow.sdk import BaseHook

from airflow_provider_eh.client.failures import FailureSite, StoreRole, provider_error
from airflow_provider_eh.errors import ConnectionConfigError, EventHubsProviderError, SinkConfigError
from airflow_provider_eh.hooks._connection import extra_field

if TYPE_CHECKING:
    from azure.storage.blob import BlobServiceClient, ContainerClient
    from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
    from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

from airflow_provider_eh.hooks.blob_connection import (
    CONN_TYPE,
    _BlobConnection,
    account_options,
    options_of_connection_string,
    pooled_transport,
)


class BlobStorageHook(_BlobConnection, BaseHook):
    """
    Sync Azure Blob clients from a ``wasb`` connection.

    :param wasb_conn_id: the Airflow connection id.
    :param pool_size: connections kept open to the account, for callers that read with that many threads at
        once (the Event Hubs view); ``None``: the HTTP library's default (10), beyond which each request of a
        busier caller opens a connection and throws it away.
    """

    def __init__(self, wasb_conn_id: str = _BlobConnection.default_conn_name, *, pool_size: int | None = None):
        super().__init__()
        self.wasb_conn_id = wasb_conn_id
        self.pool_size = pool_size
        self._how = ""

    @cached_property
    def _conn(self) -> Any:
        return self.get_connection(self.wasb_conn_id)

    @cached_property
    def service_client(self) -> BlobServiceClient:
        """The account's BlobServiceClient, built once per hook."""
        from azure.storage.blob import BlobServiceClient

        conn = self._conn
        how, kwargs = self._service_kwargs(conn, aio=False)
        self._how = how
        network = self._network_kwargs(conn)
        self.log.info("Blob connection %s: using %s%s", self.wasb_conn_id, how,
                      " through a proxy" if "proxies" in network else "")
        if self.pool_size:
            network["transport"] = pooled_transport(self.pool_size, network.get("connection_verify"))
        if "conn_str" in kwargs:
            return BlobServiceClient.from_connection_string(kwargs["conn_str"], **network)
        return BlobServiceClient(**kwargs, **network)

    def get_container_client(self, container: str) -> ContainerClient:
        return self.service_client.get_container_client(container)

    def failure_site(self, container: str | None = None, *, container_field: str = "the container",
                     role: StoreRole = "", done: str = "") -> FailureSite:
        """Where a failure on this account (and ``container``) happens, for the error map
        (:mod:`airflow_provider_eh.client.failures`): the account's address, the proxy, the credential's
        fields; no credential in it.

        :param container_field: the argument or field that names the container (``state_container``).
        :param role: what the container holds, for the error of a missing one.
        """
        client = self.service_client
        return self._failure_site(self._conn, self._how, f"{client.scheme}://{client.primary_hostname}",
                                  container=container, container_field=container_field, role=role, done=done)

    def failure(self, exc: BaseException, doing: str, container: str | None = None) -> EventHubsProviderError:
        """The package's error for ``exc``, raised while ``doing``: the error map's, else unreachable."""
        try:
            site = self.failure_site(container)
        except Exception:  # the client itself cannot be built: nothing to map at
            return self._unreachable(exc, doing)
        mapped = provider_error(exc, site.during(doing))
        return mapped if mapped is not None else self._unreachable(exc, doing)

    def delta_storage_options(self) -> dict[str, str]:
        """
        The connection's account and credential as delta-rs (``deltalake``) object store options, for a Delta
        table at an ``abfss://`` or ``az://`` URI: the credential this hook would use, in the same order
        (connection string, service principal, account key, SAS, then the managed identity / environment chain
        of delta-rs itself); a host that is not ``*.blob.core.windows.net`` (Azurite, a sovereign cloud) becomes
        ``azure_storage_endpoint``. The values hold secrets: pass them to ``deltalake`` only, never log them.
        """
        conn = self._conn
        how, kwargs = self._service_kwargs(conn, aio=False)
        extras = conn.extra_dejson or {}
        if how == "connection_string":
            return options_of_connection_string(kwargs["conn_str"])
        account_url = kwargs["account_url"]
        options = account_options(account_url)
        if how == "account_key":
            options["azure_storage_account_key"] = str(kwargs["credential"])
        elif how == "client_secret":
            options.update(azure_client_id=conn.login, azure_client_secret=conn.password,
                           azure_tenant_id=str(extra_field(extras, CONN_TYPE, "tenant_id")))
        elif how == "sas_token":
            options["azure_storage_sas_token"] = str(extra_field(extras, CONN_TYPE, "sas_token")).lstrip("?")
        elif how == "sas_url":
            options["azure_storage_sas_token"] = urlparse(account_url).query
        else:
            client_id = extra_field(extras, CONN_TYPE, "managed_identity_client_id")
            if client_id:
                options["azure_msi_client_id"] = str(client_id)
        return options

    def ensure_container(self, container: str) -> ContainerClient:
        """The container's client, creating the container when it does not exist yet."""
        from azure.core.exceptions import ResourceExistsError

        client = self.get_container_client(container)
        try:
            client.create_container()
        except ResourceExistsError:
            pass
        except Exception as exc:
            raise self.failure(exc, f"creating container {container!r}", container) from exc
        return client

    def test_connection(self) -> tuple[bool, str]:
        """One cheap real call: read the account's service properties. A failure's message is the error
        map's: the connection, the account's address or proxy, and the field to check."""
        try:
            self.service_client.get_service_properties()
        except ConnectionConfigError as exc:  # a field that does not parse: already names it
            return False, str(exc)
        except Exception as exc:
            return False, str(self.failure(exc, "reading the account's service properties"))
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
        self._conn: Any = None
        self._how = ""

    async def get_service_client(self) -> AsyncBlobServiceClient:
        if self._service is None:
            from azure.storage.blob.aio import BlobServiceClient

            conn = self._conn = await self.aget_connection(self.wasb_conn_id)
            how, kwargs = self._service_kwargs(conn, aio=True)
            self._how = how
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

    async def failure_site(self, container: str | None = None, *, container_field: str = "the container",
                           role: StoreRole = "", done: str = "") -> FailureSite:
        """:meth:`BlobStorageHook.failure_site`, for the async clients."""
        client = await self.get_service_client()
        return self._failure_site(self._conn, self._how, f"{client.scheme}://{client.primary_hostname}",
                                  container=container, container_field=container_field, role=role, done=done)

    async def close(self) -> None:
        if self._service is not None:
            await self._service.close()
            self._service = None


#: the URI schemes of a Delta table on Azure storage
AZURE_SCHEMES = ("abfss://", "abfs://", "az://", "azure://", "adl://")


def delta_storage_options(uri: str, wasb_conn_id: str) -> dict[str, str] | None:
    """The object store options of a Delta table at ``uri``: the ``wasb`` connection's account and credential for
    an Azure URI, none for a local path. They hold secrets: they go to ``deltalake`` only."""
    if not uri.lower().startswith(AZURE_SCHEMES):
        if "://" in uri and not uri.lower().startswith("file://"):
            raise SinkConfigError(
                f"table {uri!r}: the Delta sink writes to a local path or to Azure storage "
                "(abfss://container@account.dfs.core.windows.net/path or az://container/path)"
            )
        return None
    return BlobStorageHook(wasb_conn_id).delta_storage_options()
