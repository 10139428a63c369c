"""How to reach one Event Hub, and the package's one factory of SDK clients.

``EventHubsEndpoint`` is plain data with no Airflow import: hooks build it from a connection, the
publishing engine and the consumer side take it, and it pickles to Spark executors, which build
their own clients from it. Secrets are kept out of ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.client.network import NetworkOptions

if TYPE_CHECKING:
    from azure.eventhub import EventHubConsumerClient, EventHubProducerClient
    from azure.eventhub.aio import EventHubConsumerClient as AsyncConsumerClient
    from azure.eventhub.aio import EventHubProducerClient as AsyncProducerClient


def parse_connection_string(conn_str: str) -> dict[str, str]:
    """Split ``Key=Value;...`` into a dict with lower-cased keys; values keep their case."""
    parts: dict[str, str] = {}
    for item in conn_str.split(";"):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"segment {key.strip()!r} has no '='")
        parts[key.strip().lower()] = value.strip()
    return parts


#: the ports a namespace is reached on when none is written: AMQP over TLS, and AMQP over WebSockets
DEFAULT_PORTS = ("5671", "443")


def canonical_namespace(namespace: str) -> str:
    """One spelling of a namespace, for what is keyed by it (producer state, ingestion checkpoints).

    ``MyNs.servicebus.windows.net``, ``mynamespace.servicebus.windows.net:5671`` and
    ``sb://mynamespace.servicebus.windows.net/`` name the same namespace, so they must name the same
    producer state: two spellings would give one hub two ledgers and no mutual exclusion. The scheme,
    any path, a default port (5671, 443) and the case are dropped; another port (the local endpoint's)
    is kept.
    """
    text = namespace.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    text = text.split("/", 1)[0].lower()
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")  # [::1]:5671; a bare IPv6 address has no port
    if sep and port in DEFAULT_PORTS and host and (bracketed or ":" not in host):
        return host
    return text



def entra_credential(kind: str, tenant_id: str | None, client_id: str | None, client_secret: str | None,
                     managed_identity_client_id: str | None, *, aio: bool = False) -> Any:
    """A Microsoft Entra ``TokenCredential`` (``aio``: an ``AsyncTokenCredential``): a service principal's secret
    when ``kind`` is ``client_secret`` and its three fields are set, else ``DefaultAzureCredential`` (with the
    managed identity's client id when given)."""
    if kind == "client_secret" and tenant_id and client_id and client_secret:
        if aio:
            from azure.identity.aio import ClientSecretCredential
        else:
            from azure.identity import ClientSecretCredential  # type: ignore[assignment]
        return ClientSecretCredential(tenant_id, client_id, client_secret)
    if aio:
        from azure.identity.aio import DefaultAzureCredential
    else:
        from azure.identity import DefaultAzureCredential  # type: ignore[assignment]
    # only when given: passing None would override AZURE_CLIENT_ID, which the credential reads by default
    extra = {"managed_identity_client_id": managed_identity_client_id} if managed_identity_client_id else {}
    return DefaultAzureCredential(**extra)

@dataclass(frozen=True)
class EventHubsEndpoint:
    """
    One hub on one namespace, and the credential to use.

    :param fully_qualified_namespace: ``<ns>.servicebus.windows.net`` (``host:port`` for the local endpoint).
    :param eventhub_name: the hub.
    :param connection_string: a SAS connection string; takes precedence over the other credentials.
    :param tenant_id: with ``client_id`` and ``client_secret``: a service principal.
    :param managed_identity_client_id: for ``DefaultAzureCredential`` with a user-assigned identity.
    :param network: how clients reach the namespace (WebSockets, proxy, custom endpoint address, CA bundle).
    :param conn_id: the Airflow connection it was read from (the hook sets it), so a failure on it names that
        connection wherever it happens (:func:`~airflow_provider_eh.client.failures.site_of`); ``None`` when
        built without one. Not part of the endpoint's identity: two connections to one hub share its clients.
    """

    fully_qualified_namespace: str
    eventhub_name: str
    connection_string: str | None = field(default=None, repr=False)
    tenant_id: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    managed_identity_client_id: str | None = None
    network: NetworkOptions = field(default_factory=NetworkOptions)
    conn_id: str | None = field(default=None, compare=False)

    @classmethod
    def from_connection_string(cls, conn_str: str, eventhub_name: str | None = None,
                               network: NetworkOptions | None = None) -> EventHubsEndpoint:
        parts = parse_connection_string(conn_str)
        host = parts.get("endpoint", "").split("://", 1)[-1].strip("/")
        hub = eventhub_name or parts.get("entitypath")
        if not host:
            raise ValueError("the connection string has no Endpoint=sb://<namespace>/")
        if not hub:
            raise ValueError("no Event Hub name: pass eventhub_name or add EntityPath=<hub> to the connection string")
        return cls(fully_qualified_namespace=host, eventhub_name=hub, connection_string=conn_str,
                   network=network or NetworkOptions())

    @property
    def credential_kind(self) -> str:
        if self.connection_string:
            return "connection_string"
        if self.tenant_id and self.client_id and self.client_secret:
            return "client_secret"
        return "default_azure_credential"

    @property
    def namespace(self) -> str:
        """The namespace's one spelling (:func:`canonical_namespace`), as producer state and ingestion key it."""
        return canonical_namespace(self.fully_qualified_namespace)

    def with_hub(self, eventhub_name: str) -> EventHubsEndpoint:
        """The same namespace, credential and network path, another hub."""
        from dataclasses import replace

        return replace(self, eventhub_name=eventhub_name)

    def _credential(self, *, aio: bool) -> Any:
        return entra_credential(self.credential_kind, self.tenant_id, self.client_id, self.client_secret,
                                self.managed_identity_client_id, aio=aio)

    def _kwargs(self, *, aio: bool, **kwargs: Any) -> dict[str, Any]:
        return {
            "fully_qualified_namespace": self.fully_qualified_namespace,
            "eventhub_name": self.eventhub_name,
            "credential": self._credential(aio=aio),
            **kwargs,
        }

    def client_kwargs(self, kwargs: dict[str, Any], aio: bool = False) -> dict[str, Any]:
        """The network path's SDK arguments (:class:`NetworkOptions`) under the caller's ``kwargs``."""
        return {**self.network.client_kwargs(aio=aio), **kwargs}

    def producer(self, **kwargs: Any) -> EventHubProducerClient:
        """A sync producer client (:class:`~airflow_provider_eh.client.single_connection.SingleConnectionProducerClient`) on the
        process's one connection to this hub (:mod:`~airflow_provider_eh.client.connection`), with its
        kept management link; the caller closes it (use it as a context manager)."""
        from airflow_provider_eh.client.single_connection import SingleConnectionProducerClient

        kwargs = self.client_kwargs(kwargs)
        if self.connection_string:
            return SingleConnectionProducerClient.from_connection_string(
                self.connection_string, eventhub_name=self.eventhub_name, share=self, **kwargs
            )
        return SingleConnectionProducerClient(**self._kwargs(aio=False, share=self, **kwargs))

    def plain_producer(self, **kwargs: Any) -> EventHubProducerClient:
        """The SDK's own producer client with the same settings (what a plain pipeline uses: the baselines
        the benchmarks compare with)."""
        from azure.eventhub import EventHubProducerClient

        kwargs = self.client_kwargs(kwargs)
        if self.connection_string:
            return EventHubProducerClient.from_connection_string(
                self.connection_string, eventhub_name=self.eventhub_name, **kwargs
            )
        return EventHubProducerClient(**self._kwargs(aio=False, **kwargs))

    def consumer(self, consumer_group: str = "$Default", *, shared: bool = False, **kwargs: Any) -> EventHubConsumerClient:
        """A sync consumer client; ``kwargs`` go to the SDK (``checkpoint_store``, ``prefetch``, ...).

        :param shared: open its receivers on the process's one connection to this hub, beside the
            producers' (the engine's read-back); ``False``: a connection per receiver (ingestion's
            readers, which move the most bytes).
        """
        from azure.eventhub import EventHubConsumerClient

        from airflow_provider_eh.client.single_connection import SingleConnectionConsumerClient

        kwargs = self.client_kwargs(kwargs)
        share: dict[str, Any] = {"share": self} if shared else {}
        cls = SingleConnectionConsumerClient if shared else EventHubConsumerClient
        if self.connection_string:
            return cls.from_connection_string(
                self.connection_string, consumer_group=consumer_group, eventhub_name=self.eventhub_name, **share, **kwargs
            )
        return cls(consumer_group=consumer_group, **self._kwargs(aio=False, **share, **kwargs))

    def async_producer(self, **kwargs: Any) -> AsyncProducerClient:
        from azure.eventhub.aio import EventHubProducerClient

        kwargs = self.client_kwargs(kwargs, aio=True)
        if self.connection_string:
            return EventHubProducerClient.from_connection_string(
                self.connection_string, eventhub_name=self.eventhub_name, **kwargs
            )
        return EventHubProducerClient(**self._kwargs(aio=True, **kwargs))

    def async_consumer(self, consumer_group: str = "$Default", **kwargs: Any) -> AsyncConsumerClient:
        from azure.eventhub.aio import EventHubConsumerClient

        kwargs = self.client_kwargs(kwargs, aio=True)
        if self.connection_string:
            return EventHubConsumerClient.from_connection_string(
                self.connection_string, consumer_group=consumer_group, eventhub_name=self.eventhub_name, **kwargs
            )
        return EventHubConsumerClient(consumer_group=consumer_group, **self._kwargs(aio=True, **kwargs))
