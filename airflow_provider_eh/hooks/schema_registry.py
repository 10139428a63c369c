"""Microsoft's ``SchemaRegistryClient`` from an Airflow connection of type ``azure_event_hubs``.

The namespace's Schema Registry is reached with the same connection as its hubs; what differs:

* the registry's address: the ``schema_registry_namespace`` field, else the connection's namespace
  (a connection string's ``Endpoint`` or the host). The local endpoint serves its registry on a port of
  its own (``eventhubs-local --registry-port``), so its connections set the field (``127.0.0.1:<port>``);
* the credential: a connection string with ``UseDevelopmentEmulator=true`` signs SAS tokens with its
  key (the local endpoint); client id + secret + ``tenant_id`` make a service principal; anything else
  (a connection string to Azure included: Azure's registry takes Microsoft Entra tokens only) uses
  ``DefaultAzureCredential`` with ``managed_identity_client_id``;
* the ``ca_bundle`` field is the CA the client trusts (the local endpoint's certificate).

The kind of credential is logged, never its value; the key and secrets are masked.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_eh.client.endpoint import parse_connection_string
from airflow_provider_eh.client.schema_registry import SchemaRegistryEndpoint, registry_endpoint
from airflow_provider_eh.errors import ConnectionConfigError
from airflow_provider_eh.hooks._connection import extra_field, masked

if TYPE_CHECKING:
    from azure.schemaregistry import SchemaRegistryClient
    from azure.schemaregistry.aio import SchemaRegistryClient as AsyncSchemaRegistryClient

CONN_TYPE = "azure_event_hubs"


class _SchemaRegistryConnection:
    """What the sync and async hooks share: the connection id, its type and default (as the Event Hubs hooks')."""

    conn_name_attr = "event_hubs_conn_id"
    default_conn_name = "azure_event_hubs_default"
    conn_type = CONN_TYPE
    hook_name = "Azure Schema Registry"

    def __init__(self, event_hubs_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.event_hubs_conn_id = event_hubs_conn_id


class SchemaRegistryHook(_SchemaRegistryConnection, BaseHook):
    """
    Microsoft's ``SchemaRegistryClient`` for the namespace of an ``azure_event_hubs`` connection.

    :param event_hubs_conn_id: the Airflow connection id.
    """

    @cached_property
    def _conn(self) -> Any:
        return self.get_connection(self.event_hubs_conn_id)

    def get_endpoint(self) -> SchemaRegistryEndpoint:
        """Where the registry is and how to authenticate; opens nothing."""
        endpoint = endpoint_from(self.event_hubs_conn_id, self._conn)
        self.log.debug("Schema Registry of connection %s: %s at %s%s", self.event_hubs_conn_id,
                       endpoint.credential_kind, endpoint.fully_qualified_namespace,
                       f", CA bundle {endpoint.ca_bundle}" if endpoint.ca_bundle else "")
        return endpoint

    def get_client(self, **kwargs: Any) -> SchemaRegistryClient:
        """A ``SchemaRegistryClient``; ``kwargs`` go to it. The caller closes it (use it as a context manager)."""
        return self.get_endpoint().client(**kwargs)

    def get_async_client(self, **kwargs: Any) -> AsyncSchemaRegistryClient:
        """The async ``SchemaRegistryClient`` (``azure.schemaregistry.aio``); the caller closes it (``async with``).

        The connection is read here, synchronously: in a trigger, get the endpoint first
        (:meth:`get_endpoint` in ``sync_to_async``) and call its ``async_client()``.
        """
        return self.get_endpoint().async_client(**kwargs)


class SchemaRegistryAsyncHook(_SchemaRegistryConnection, BaseHook):
    """
    Async twin of :class:`SchemaRegistryHook`, for triggers: the connection is read without blocking the event loop.

    :param event_hubs_conn_id: the Airflow connection id.
    """

    def __init__(self, event_hubs_conn_id: str = _SchemaRegistryConnection.default_conn_name) -> None:
        super().__init__(event_hubs_conn_id)
        self._conn: Any = None

    async def get_endpoint(self) -> SchemaRegistryEndpoint:
        """Where the registry is and how to authenticate; opens nothing (its ``async_client()`` does)."""
        if self._conn is None:
            self._conn = await self.aget_connection(self.event_hubs_conn_id)
        return endpoint_from(self.event_hubs_conn_id, self._conn)


def endpoint_from(conn_id: str, conn: Any) -> SchemaRegistryEndpoint:
    """The registry endpoint of connection ``conn`` (id ``conn_id``), or ``ConnectionConfigError`` naming the field."""
    extras = conn.extra_dejson or {}
    conn_str = masked(extra_field(extras, CONN_TYPE, "connection_string"))
    if conn_str:
        try:
            parts = parse_connection_string(conn_str)
        except ValueError:
            parts = {}
        masked(parts.get("sharedaccesskey"))
        masked(parts.get("sharedaccesssignature"))
    try:
        return registry_endpoint(
            namespace=extra_field(extras, CONN_TYPE, "schema_registry_namespace"), connection_string=conn_str,
            host=conn.host, tenant_id=extra_field(extras, CONN_TYPE, "tenant_id"), client_id=conn.login,
            client_secret=masked(conn.password), ca_bundle=extra_field(extras, CONN_TYPE, "ca_bundle"),
            managed_identity_client_id=extra_field(extras, CONN_TYPE, "managed_identity_client_id"),
        )
    except ValueError as exc:
        raise ConnectionConfigError(conn_id, str(exc)) from None
