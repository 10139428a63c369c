"""Where a failure happened (:class:`FailureSite`): the connection, the service, its address, the field to check and
what already happened; never a credential.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlparse

if TYPE_CHECKING:
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint

Service = Literal["Event Hubs", "blob storage", "Schema Registry"]
EVENT_HUBS: Service = "Event Hubs"
BLOB_STORAGE: Service = "blob storage"
SCHEMA_REGISTRY: Service = "Schema Registry"
#: what the blob container of a site holds: the error a missing container raises follows from it
StoreRole = Literal["producer state", "checkpoints", ""]

#: what the sentence of :attr:`FailureSite.done` says when a caller knows that nothing reached the hub
NOTHING_SENT = "Nothing was sent."

#: what the checkpoint sensor's error says happened: it never writes
SENSOR_ONLY_READS = "Nothing was written: the sensor only reads checkpoints."

#: the connection id of a site no scope names (a Spark executor's): the driver puts the real one in
UNKNOWN_CONNECTION = "?"


@dataclass(frozen=True)
class FailureSite:
    """
    Where a failure happened, in the words of the connection that led there; never a credential.

    :param conn_id: the Airflow connection id.
    :param service: ``"Event Hubs"``, ``"blob storage"`` or ``"Schema Registry"``.
    :param address: the ``host:port`` the client connects to (the custom endpoint address when one is set).
    :param proxy: the HTTP proxy's ``host:port``, or ``None``.
    :param hub: the Event Hub, for an Event Hubs site.
    :param consumer_group: the consumer group read, if any.
    :param container: the blob container, for a storage site.
    :param done: a sentence of what already happened (``"Nothing was sent."``, ``"Partition 2 committed, 3
        pending: a retry resumes."``); empty when the caller cannot tell.
    :param address_field: the connection field that sets :attr:`address` (``custom_endpoint_address``,
        ``host``, the ``Endpoint`` of ``connection_string``).
    :param hub_field: where the hub's name comes from.
    :param credential_fields: the fields that make up the credential, and the role it needs.
    :param container_field: the argument or field naming the container.
    :param ca_bundle: the connection's ``ca_bundle`` path, or ``None`` (the system's CAs).
    :param role: what the container holds (``"producer state"``, ``"checkpoints"``), for the error of a missing one.
    :param doing: what was being done, to lead the message (``"reading the hub's properties"``); may be empty.
    """

    conn_id: str
    service: Service = EVENT_HUBS
    address: str = ""
    proxy: str | None = None
    hub: str | None = None
    consumer_group: str | None = None
    container: str | None = None
    done: str = ""
    address_field: str = "host"
    hub_field: str = "eventhub_name"
    credential_fields: str = "the credential fields"
    container_field: str = "the container"
    ca_bundle: str | None = None
    role: StoreRole = ""
    doing: str = ""

    @classmethod
    def of_endpoint(cls, conn_id: str, endpoint: EventHubsEndpoint, *, done: str = "",
                    consumer_group: str | None = None, hub_field: str | None = None) -> FailureSite:
        """The site of ``endpoint``'s hub reached through connection ``conn_id`` (no credential is kept).

        :param hub_field: where the hub's name came from, when the caller knows (an operator's argument).
        """
        network = endpoint.network
        websocket = network.transport == "websocket"
        if network.custom_endpoint_address:
            address = _host_port(network.custom_endpoint_address, 443 if websocket else 5671)
            address_field = "custom_endpoint_address"
        else:
            address = _host_port(endpoint.fully_qualified_namespace, 443 if websocket else 5671)
            address_field = "the Endpoint of connection_string" if endpoint.connection_string else "host"
        if endpoint.connection_string:
            in_string = "SharedAccessSignature" in endpoint.connection_string
            credential = ("the SAS token (SharedAccessSignature of connection_string)" if in_string else
                          "the SAS key name and key (SharedAccessKeyName and SharedAccessKey of connection_string)")
            default_hub_field = "the eventhub_name argument, the EntityPath of connection_string or the eventhub_name field"
        else:
            credential = ("login (client id), password (client secret) and tenant_id"
                          if endpoint.credential_kind == "client_secret" else "the identity DefaultAzureCredential finds")
            credential += (" and its role on the hub (Azure Event Hubs Data Sender to publish, Data Receiver to read)")
            default_hub_field = "the eventhub_name argument or the eventhub_name field"
        proxy = f"{network.proxy_host}:{network.proxy_port}" if network.proxy_host else None
        return cls(conn_id=conn_id, service=EVENT_HUBS, address=address, proxy=proxy, hub=endpoint.eventhub_name,
                   consumer_group=consumer_group, done=done, address_field=address_field,
                   hub_field=hub_field or default_hub_field, credential_fields=credential,
                   ca_bundle=network.ca_bundle)

    @classmethod
    def of_blob(cls, conn_id: str, account_url: str | None, *, container: str | None = None,
                container_field: str = "the container", proxy: str | None = None, ca_bundle: str | None = None,
                credential_fields: str = "the connection's key, SAS token or identity (and its Storage Blob Data role)",
                role: StoreRole = "", done: str = "") -> FailureSite:
        """The site of a blob account (``account_url``: the client's URL; a SAS in its query is dropped)."""
        address = _host_port(account_url or "", 443) if account_url else ""
        return cls(conn_id=conn_id, service=BLOB_STORAGE, address=address, proxy=proxy, container=container,
                   container_field=container_field, address_field="host (the account URL) or connection_string",
                   credential_fields=credential_fields, ca_bundle=ca_bundle, role=role, done=done)

    @classmethod
    def of_registry(cls, conn_id: str, namespace: str, *, ca_bundle: str | None = None, done: str = "") -> FailureSite:
        """The site of the Schema Registry of ``namespace`` (``<ns>.servicebus.windows.net``, or the local endpoint's
        ``host:port``), as its client names it."""
        return cls(conn_id=conn_id, service=SCHEMA_REGISTRY, address=namespace, ca_bundle=ca_bundle, done=done,
                   address_field="schema_registry_namespace (or the connection's namespace)",
                   credential_fields="the connection's key, or give its identity the Schema Registry Reader role")

    def having_done(self, done: str) -> FailureSite:
        """The same site with another sentence of what already happened."""
        return replace(self, done=done)

    def during(self, doing: str) -> FailureSite:
        """The same site, the message led by ``doing`` (``"reading the hub's properties"``)."""
        return replace(self, doing=doing)

    def describe(self) -> str:
        """``Event Hub 'orders' at ns.servicebus.windows.net:443 through HTTP proxy 10.0.0.1:3128``, or
        ``blob storage at acct.blob.core.windows.net:443, container 'eh-state'``."""
        if self.service == EVENT_HUBS:
            what = f"Event Hub {self.hub!r}" if self.hub else "Event Hubs"
            if self.consumer_group:
                what += f" (consumer group {self.consumer_group!r})"
        else:
            what = self.service
        if self.address:
            what += f" at {self.address}"
        if self.service == BLOB_STORAGE and self.container:
            what += f", container {self.container!r}"
        if self.proxy:
            what += f" through HTTP proxy {self.proxy}"
        return what


def _host_port(address: str, default_port: int) -> str:
    """``host:port`` of an address or URL, with nothing else of it (no user, path or query)."""
    text = address.strip()
    parsed = urlparse(text if "://" in text else f"sb://{text}")
    host = parsed.hostname or text.split("/", 1)[0]
    try:
        port = parsed.port
    except ValueError:
        port = None
    if port is None and parsed.scheme == "http":
        port = 80
    return f"{host}:{port or default_port}"


