"""Event Hubs clients built from an Airflow connection of type ``azure_event_hubs``.

Credentials are tried in one fixed, logged order:

1. ``connection_string`` (extra, secret): a namespace or hub connection string, including the local
   endpoint's ``...;UseDevelopmentEmulator=true``;
2. host (fully qualified namespace) + login (client id) + password (client secret) + ``tenant_id``:
   a ``ClientSecretCredential``;
3. host alone: ``DefaultAzureCredential`` (managed identity, workload identity, Azure CLI, ...).

The hub comes from the call, else from the connection string's ``EntityPath``, else from the
``eventhub_name`` extra. The network path (``transport``, ``proxy_host``/``proxy_port``/
``proxy_username``/``proxy_password``, ``custom_endpoint_address``, ``ca_bundle``) applies to every
client built from the connection, whatever the credential. The hooks turn a connection into an
:class:`EventHubsEndpoint`, the package's one client factory. ``EventHubHook`` is sync;
``EventHubAsyncHook`` is its twin for triggers.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.sdk import BaseHook

from airflow_provider_eh.client.endpoint import EventHubsEndpoint, parse_connection_string
from airflow_provider_eh.client.failures import FailureSite, provider_error
from airflow_provider_eh.client.network import FIELDS as NETWORK_FIELDS
from airflow_provider_eh.client.network import NetworkOptions
from airflow_provider_eh.errors import ConnectionConfigError, ConnectionUnreachableError, EventHubsProviderError
from airflow_provider_eh.get_provider_info import connection_type
from airflow_provider_eh.hooks._connection import extra_field, masked

if TYPE_CHECKING:
    from azure.eventhub import EventHubConsumerClient, EventHubProducerClient
    from azure.eventhub.aio import EventHubConsumerClient as AsyncConsumerClient
    from azure.eventhub.aio import EventHubProducerClient as AsyncProducerClient

CONN_TYPE = "azure_event_hubs"


class _EventHubsConnection:
    """Connection handling shared by the sync and async hooks: the connection id and default hub, and the endpoint."""

    conn_name_attr = "event_hubs_conn_id"
    default_conn_name = "azure_event_hubs_default"
    conn_type = CONN_TYPE
    hook_name = "Azure Event Hubs"

    log: Any

    def __init__(self, event_hubs_conn_id: str = default_conn_name, eventhub_name: str | None = None):
        super().__init__()
        self.event_hubs_conn_id = event_hubs_conn_id
        self.eventhub_name = eventhub_name

    def _endpoint_from(self, conn: Any, eventhub_name: str | None) -> EventHubsEndpoint:
        extras = conn.extra_dejson or {}
        conn_id = self.event_hubs_conn_id
        hub = eventhub_name or self.eventhub_name
        conn_str = masked(extra_field(extras, CONN_TYPE, "connection_string"))
        if conn_str:
            try:
                parts = parse_connection_string(conn_str)
            except ValueError as exc:
                raise ConnectionConfigError(
                    conn_id,
                    f"field 'connection_string' is malformed ({exc}); "
                    "expected Endpoint=sb://...;SharedAccessKeyName=...;SharedAccessKey=...",
                ) from None
            masked(parts.get("sharedaccesskey"))
            masked(parts.get("sharedaccesssignature"))
            host = parts.get("endpoint", "").split("://", 1)[-1].strip("/")
            if not host:
                raise ConnectionConfigError(conn_id, "field 'connection_string' has no Endpoint=sb://<namespace>/")
            hub = hub or parts.get("entitypath") or extra_field(extras, CONN_TYPE, "eventhub_name")
        else:
            host = (conn.host or "").split("://", 1)[-1].strip().strip("/")
            if not host:
                raise ConnectionConfigError(
                    conn_id,
                    "set either the 'connection_string' field or the host (fully qualified namespace, "
                    "e.g. mynamespace.servicebus.windows.net)",
                )
            hub = hub or extra_field(extras, CONN_TYPE, "eventhub_name")
        if not hub:
            raise ConnectionConfigError(
                conn_id,
                "no Event Hub name: pass eventhub_name, add EntityPath=<hub> to the connection string, "
                "or set the 'eventhub_name' field",
            )
        try:
            network = NetworkOptions.from_fields({name: extra_field(extras, CONN_TYPE, name) for name in NETWORK_FIELDS})
        except ValueError as exc:
            raise ConnectionConfigError(conn_id, str(exc)) from None
        masked(network.proxy_password)
        tenant_id = extra_field(extras, CONN_TYPE, "tenant_id")
        if not conn_str and conn.login and conn.password and not tenant_id:
            raise ConnectionConfigError(conn_id, "client id and secret are set but the 'tenant_id' field is empty")
        endpoint = EventHubsEndpoint(
            fully_qualified_namespace=host,
            eventhub_name=str(hub),
            connection_string=conn_str,
            tenant_id=tenant_id,
            client_id=None if conn_str else conn.login,
            client_secret=None if conn_str else masked(conn.password),
            managed_identity_client_id=extra_field(extras, CONN_TYPE, "managed_identity_client_id"),
            network=network,
            conn_id=conn_id,
        )
        self.log.debug(
            "Event Hubs connection %s: %s for hub %s on %s, %s",
            conn_id, endpoint.credential_kind, endpoint.eventhub_name, endpoint.fully_qualified_namespace,
            network.describe(),
        )
        return endpoint

    def failure_site(self, endpoint: EventHubsEndpoint, *, consumer_group: str | None = None,
                     done: str = "") -> FailureSite:
        """Where a failure on ``endpoint`` through this connection happens, for the error map
        (:mod:`airflow_provider_eh.client.failures`); no credential in it."""
        return FailureSite.of_endpoint(self.event_hubs_conn_id, endpoint, consumer_group=consumer_group, done=done)

    def failure(self, endpoint: EventHubsEndpoint, exc: BaseException, doing: str) -> EventHubsProviderError:
        """The package's error for ``exc``, raised while ``doing``: the error map's, a bad network field
        (``ca_bundle`` not a file) as a configuration error, anything else as unreachable."""
        mapped = provider_error(exc, self.failure_site(endpoint).during(doing))
        if mapped is not None:
            return mapped
        if isinstance(exc, ValueError):
            return ConnectionConfigError(self.event_hubs_conn_id, str(exc))
        return self._unreachable(endpoint, exc)

    def _unreachable(self, endpoint: EventHubsEndpoint, exc: BaseException) -> ConnectionUnreachableError:
        network = endpoint.network
        path = "" if network.is_default else f" ({network.describe()})"
        check = "the namespace, the hub name and the credentials"
        if network.proxy_host:
            check += f", and the HTTP proxy {network.proxy_host}:{network.proxy_port} and its user and password"
        elif not network.is_default:
            check += ", and the connection's network fields"
        return ConnectionUnreachableError(
            self.event_hubs_conn_id,
            f"cannot read Event Hub {endpoint.eventhub_name!r} on {endpoint.fully_qualified_namespace}{path}: "
            f"{type(exc).__name__}: {exc}. Check {check}.",
        )

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:

        behaviour = connection_type(CONN_TYPE)["ui-field-behaviour"]
        return {
            "hidden_fields": behaviour["hidden-fields"],
            "relabeling": behaviour["relabeling"],
            "placeholders": behaviour["placeholders"],
        }


class EventHubHook(_EventHubsConnection, BaseHook):
    """
    Sync clients for Azure Event Hubs from an ``azure_event_hubs`` connection.

    :param event_hubs_conn_id: the Airflow connection id.
    :param eventhub_name: default hub for calls that do not name one.
    """

    @cached_property
    def _conn(self) -> Any:
        return self.get_connection(self.event_hubs_conn_id)

    def get_endpoint(self, eventhub_name: str | None = None) -> EventHubsEndpoint:
        """Where ``eventhub_name`` (or the default hub) lives and how to authenticate; opens nothing."""
        return self._endpoint_from(self._conn, eventhub_name)

    def get_producer_client(self, eventhub_name: str | None = None, **kwargs: Any) -> EventHubProducerClient:
        """A producer client for the hub; the caller closes it (use it as a context manager)."""
        return self.get_endpoint(eventhub_name).producer(**kwargs)

    def get_consumer_client(
        self, consumer_group: str = "$Default", eventhub_name: str | None = None, **kwargs: Any
    ) -> EventHubConsumerClient:
        """A consumer client for the hub and consumer group; ``kwargs`` go to the SDK."""
        return self.get_endpoint(eventhub_name).consumer(consumer_group, **kwargs)

    def get_eventhub_properties(self, eventhub_name: str | None = None) -> dict[str, Any]:
        """Hub properties (``name``, ``created_at``, ``partition_ids``)."""
        endpoint = self.get_endpoint(eventhub_name)
        try:
            with endpoint.producer(retry_total=1) as client:
                return client.get_eventhub_properties()
        except Exception as exc:
            raise self.failure(endpoint, exc, "reading the hub's properties") from exc

    def get_partition_ids(self, eventhub_name: str | None = None) -> list[str]:
        """The hub's partition ids, in the service's order."""
        return list(self.get_eventhub_properties(eventhub_name)["partition_ids"])

    def get_partition_properties(self, partition_id: str, eventhub_name: str | None = None) -> dict[str, Any]:
        """One partition's properties (begin and last enqueued sequence numbers, offsets, emptiness)."""
        endpoint = self.get_endpoint(eventhub_name)
        try:
            with endpoint.producer(retry_total=1) as client:
                return client.get_partition_properties(str(partition_id))
        except Exception as exc:
            raise self.failure(endpoint, exc, f"reading partition {partition_id}'s properties") from exc

    def test_connection(self) -> tuple[bool, str]:
        """One cheap real call: read the hub's properties. A failure's message is the error map's: the
        connection, the address or proxy, and the field to check."""
        try:
            props = self.get_eventhub_properties()
        except Exception as exc:
            return False, str(exc)
        return True, f"Event Hub {props['eventhub_name']!r} reachable with {len(props['partition_ids'])} partitions"


class EventHubAsyncHook(_EventHubsConnection, BaseHook):
    """
    Async twin of :class:`EventHubHook`, for triggers.

    :param event_hubs_conn_id: the Airflow connection id.
    :param eventhub_name: default hub for calls that do not name one.
    """

    def __init__(
        self, event_hubs_conn_id: str = _EventHubsConnection.default_conn_name, eventhub_name: str | None = None
    ):
        super().__init__(event_hubs_conn_id, eventhub_name)
        self._conn: Any = None

    async def get_endpoint(self, eventhub_name: str | None = None) -> EventHubsEndpoint:
        if self._conn is None:
            self._conn = await self.aget_connection(self.event_hubs_conn_id)
        return self._endpoint_from(self._conn, eventhub_name)

    async def get_producer_client(self, eventhub_name: str | None = None, **kwargs: Any) -> AsyncProducerClient:
        return (await self.get_endpoint(eventhub_name)).async_producer(**kwargs)

    async def get_consumer_client(
        self, consumer_group: str = "$Default", eventhub_name: str | None = None, **kwargs: Any
    ) -> AsyncConsumerClient:
        return (await self.get_endpoint(eventhub_name)).async_consumer(consumer_group, **kwargs)

    async def get_eventhub_properties(self, eventhub_name: str | None = None) -> dict[str, Any]:
        endpoint = await self.get_endpoint(eventhub_name)
        try:
            async with endpoint.async_producer(retry_total=1) as client:
                return await client.get_eventhub_properties()
        except Exception as exc:
            raise self.failure(endpoint, exc, "reading the hub's properties") from exc

    async def get_partition_ids(self, eventhub_name: str | None = None) -> list[str]:
        return list((await self.get_eventhub_properties(eventhub_name))["partition_ids"])

    async def get_partition_properties(self, partition_id: str, eventhub_name: str | None = None) -> dict[str, Any]:
        endpoint = await self.get_endpoint(eventhub_name)
        try:
            async with endpoint.async_producer(retry_total=1) as client:
                return await client.get_partition_properties(str(partition_id))
        except Exception as exc:
            raise self.failure(endpoint, exc, f"reading partition {partition_id}'s properties") from exc


#: names the hooks had before they were spelled as the operators are (``EventHub*``)
_RENAMED = {"EventHubsHook": "EventHubHook", "EventHubsAsyncHook": "EventHubAsyncHook"}


def __getattr__(name: str) -> Any:
    """The hooks' old names, with an ``AirflowProviderDeprecationWarning`` naming the new one."""
    if name in _RENAMED:
        warnings.warn(f"{name} is deprecated and will be removed in 2.0.0; use "
                      f"airflow_provider_eh.hooks.event_hubs.{_RENAMED[name]}", AirflowProviderDeprecationWarning,
                      stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
