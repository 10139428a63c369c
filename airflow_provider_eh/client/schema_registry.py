"""Where a namespace's Schema Registry is and how to authenticate to it: Microsoft's ``SchemaRegistryClient``.

:class:`SchemaRegistryEndpoint` is plain data with no Airflow import, like
:class:`~airflow_provider_eh.client.endpoint.EventHubsEndpoint`: the hook builds it from an
``azure_event_hubs`` connection, and what encodes or decodes typed events (a publish, a Spark
executor, an ingestion) builds its own client from it with :meth:`SchemaRegistryEndpoint.client`.
Secrets stay out of ``repr``.

Credentials, by the connection's kind:

* the local endpoint (a connection string with ``UseDevelopmentEmulator=true``): its shared access
  key signs SAS tokens for the registry's address (:class:`SharedAccessKeyCredential`), which the
  endpoint checks with ``--require-auth``; the registry is at the ``schema_registry_namespace`` field
  (``127.0.0.1:<registry port>``), over HTTPS with the ``ca_bundle`` field's CA;
* a service principal (client id, secret, tenant): a ``ClientSecretCredential``;
* otherwise ``DefaultAzureCredential`` (optionally ``managed_identity_client_id``): Azure's Schema
  Registry takes Microsoft Entra tokens only, so a connection string to Azure reaches it this way too
  (the identity needs the Schema Registry Reader or Contributor role on the namespace).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote_plus, urlencode

from airflow_provider_eh.client.endpoint import canonical_namespace, entra_credential, parse_connection_string

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken
    from azure.schemaregistry import SchemaRegistryClient
    from azure.schemaregistry.aio import SchemaRegistryClient as AsyncSchemaRegistryClient

#: how long a signed SAS token lives; the client asks again before it expires
TOKEN_SECONDS = 3600
#: the token scope of Azure Schema Registry (the one ``SchemaRegistryClient`` asks for)
SCOPE = "https://eventhubs.azure.net/.default"
#: the data-plane version of the list-versions request
API_VERSION = "2022-10"


class SharedAccessKeyCredential:
    """A ``TokenCredential`` of a namespace's shared access key: SAS tokens for ``audience``.

    :param audience: what the tokens are for, ``https://<namespace>/`` (the local endpoint's registry).
    :param key_name: the key's name (``SharedAccessKeyName``).
    :param key: the key (``SharedAccessKey``); never in ``repr``.
    :param signature: a token signed already (``SharedAccessSignature=`` of a connection string), given as is
        until its expiry.
    """

    def __init__(self, audience: str, key_name: str = "", key: str = "", signature: str = "") -> None:
        if not signature and not (key_name and key):
            raise ValueError("a shared access key credential needs SharedAccessKeyName and SharedAccessKey, "
                             "or a SharedAccessSignature")
        self.audience = audience
        self.key_name = key_name
        self.__key = key
        self.__signature = signature

    def __repr__(self) -> str:
        return f"SharedAccessKeyCredential(audience={self.audience!r}, key_name={self.key_name!r})"

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        """A SAS token (whatever ``scopes``: the key signs for the namespace)."""
        from azure.core.credentials import AccessToken

        if self.__signature:
            fields = parse_qs(self.__signature.split(" ", 1)[-1])
            expiry = int((fields.get("se") or [str(int(time.time()) + TOKEN_SECONDS)])[0])
            return AccessToken(self.__signature, expiry)
        expiry = int(time.time()) + TOKEN_SECONDS
        return AccessToken(sas_token(self.audience, self.key_name, self.__key, expiry), expiry)

    def close(self) -> None:
        """Nothing to release (the ``TokenCredential`` protocol's)."""


class AsyncSharedAccessKeyCredential(SharedAccessKeyCredential):
    """The same credential for the async clients (an ``AsyncTokenCredential``)."""

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:  # type: ignore[override]
        """A SAS token, as :meth:`SharedAccessKeyCredential.get_token` signs it."""
        return SharedAccessKeyCredential.get_token(self, *scopes, **kwargs)

    async def close(self) -> None:  # type: ignore[override]
        """Nothing to release."""

    async def __aenter__(self) -> AsyncSharedAccessKeyCredential:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


def sas_token(audience: str, key_name: str, key: str, expiry: int) -> str:
    """A SAS token for ``audience`` signed with ``key``: HMAC-SHA256 of the url-encoded audience and the expiry."""
    signature = base64.b64encode(hmac.new(key.encode(), f"{quote_plus(audience)}\n{expiry}".encode(),
                                          hashlib.sha256).digest())
    return "SharedAccessSignature " + urlencode({"sr": audience, "sig": signature, "se": str(expiry), "skn": key_name})


@dataclass(frozen=True)
class SchemaRegistryEndpoint:
    """
    A namespace's Schema Registry and the credential to use.

    :param fully_qualified_namespace: ``<ns>.servicebus.windows.net``, or ``host:port`` of the local
        endpoint's registry; the client reaches ``https://`` of it.
    :param credential_kind: ``shared_access_key`` (the local endpoint), ``client_secret`` or
        ``default_azure_credential``.
    :param key_name: with ``key`` (or ``signature``): the shared access key of ``shared_access_key``.
    :param ca_bundle: a PEM file of CAs to trust (the local endpoint's own); empty: the system's.
    """

    fully_qualified_namespace: str
    credential_kind: str
    key_name: str | None = None
    key: str | None = field(default=None, repr=False)
    signature: str | None = field(default=None, repr=False)
    tenant_id: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    managed_identity_client_id: str | None = None
    ca_bundle: str | None = None

    @property
    def url(self) -> str:
        return f"https://{self.fully_qualified_namespace}"

    def credential(self, *, aio: bool = False) -> Any:
        """The ``TokenCredential`` of :attr:`credential_kind` (``aio``: an ``AsyncTokenCredential``)."""
        if self.credential_kind == "shared_access_key":
            cls = AsyncSharedAccessKeyCredential if aio else SharedAccessKeyCredential
            return cls(self.url + "/", self.key_name or "", self.key or "", self.signature or "")
        return entra_credential(self.credential_kind, self.tenant_id, self.client_id, self.client_secret,
                                self.managed_identity_client_id, aio=aio)

    def client_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The transport's arguments (the CA bundle as ``connection_verify``) under the caller's ``kwargs``."""
        base: dict[str, Any] = {"connection_verify": self.ca_bundle} if self.ca_bundle else {}
        return {**base, **kwargs}

    def client(self, **kwargs: Any) -> SchemaRegistryClient:
        """Microsoft's ``SchemaRegistryClient`` for this registry; ``kwargs`` go to it (``retry_total``, ...).
        The caller closes it (use it as a context manager)."""
        from azure.schemaregistry import SchemaRegistryClient

        return SchemaRegistryClient(self.fully_qualified_namespace, self.credential(), **self.client_kwargs(kwargs))

    def schema_versions(self, group: str, name: str) -> list[int] | None:
        """The versions of schema ``name`` in ``group``, oldest first; ``None`` when the schema is not registered.

        The data plane's list-versions operation, sent through azure-core's public pipeline with this
        endpoint's credential: the client release the package declares has no public method for it.
        """
        from urllib.parse import quote

        from azure.core import PipelineClient
        from azure.core.pipeline.policies import BearerTokenCredentialPolicy, RetryPolicy
        from azure.core.rest import HttpRequest

        policies = [RetryPolicy(retry_total=3), BearerTokenCredentialPolicy(self.credential(), SCOPE)]
        with PipelineClient(self.url, policies=policies, **self.client_kwargs({})) as pipeline:
            request = HttpRequest("GET", f"{self.url}/$schemaGroups/{quote(group, safe='')}/schemas/"
                                         f"{quote(name, safe='')}/versions", params={"api-version": API_VERSION})
            found: list[int] = []
            while True:  # {"Value": [1, 2, ...], "NextLink": the next page's address, if any}
                response = pipeline.send_request(request)
                if response.status_code == 404:
                    return None
                response.raise_for_status()
                page = response.json()
                found += [int(v) for v in page.get("Value") or []]
                if not page.get("NextLink"):
                    return sorted(found)
                request = HttpRequest("GET", page["NextLink"] if "://" in page["NextLink"] else self.url + page["NextLink"])

    def async_client(self, **kwargs: Any) -> AsyncSchemaRegistryClient:
        """The async ``SchemaRegistryClient`` (``azure.schemaregistry.aio``), for triggers; the caller closes it."""
        from azure.schemaregistry.aio import SchemaRegistryClient as AsyncClient

        return AsyncClient(self.fully_qualified_namespace, self.credential(aio=True), **self.client_kwargs(kwargs))


#: how :func:`registry_endpoint` names its inputs in errors: an Airflow connection's fields
CONNECTION_FIELDS = {"connection_string": "field 'connection_string'", "namespace": "field 'schema_registry_namespace'",
                     "ca_bundle": "'ca_bundle'", "tenant_id": "the 'tenant_id' field",
                     "host": "the host (fully qualified namespace, e.g. mynamespace.servicebus.windows.net)",
                     "client": "client id and secret"}


def registry_endpoint(*, namespace: str | None, connection_string: str | None, host: str | None,
                      tenant_id: str | None = None, client_id: str | None = None, client_secret: str | None = None,
                      ca_bundle: str | None = None, managed_identity_client_id: str | None = None,
                      names: dict[str, str] | None = None) -> SchemaRegistryEndpoint:
    """
    The registry of a namespace reached with these credentials: the one rule of the hook and the Spark data source.

    A connection string of the local endpoint (``UseDevelopmentEmulator=true``) signs with its shared access key
    at ``namespace`` (the registry's own ``host:port``); one of Azure reaches the registry with Microsoft Entra
    tokens (``DefaultAzureCredential``); otherwise a service principal (``tenant_id``, ``client_id``,
    ``client_secret``) or ``DefaultAzureCredential``. ``ValueError`` names the input at fault by ``names``
    (default :data:`CONNECTION_FIELDS`).
    """
    label = {**CONNECTION_FIELDS, **(names or {})}
    namespace = str(namespace).split("://", 1)[-1].strip().strip("/") if namespace else None
    common: dict[str, Any] = {"ca_bundle": ca_bundle or None, "managed_identity_client_id": managed_identity_client_id or None}
    if connection_string:
        try:
            parts = parse_connection_string(connection_string)
        except ValueError as exc:
            raise ValueError(f"{label['connection_string']} is malformed ({exc})") from None
        key, signature = parts.get("sharedaccesskey"), parts.get("sharedaccesssignature")
        endpoint_host = parts.get("endpoint", "").split("://", 1)[-1].strip("/")
        if not endpoint_host:
            raise ValueError(f"{label['connection_string']} has no Endpoint=sb://<namespace>/")
        if parts.get("usedevelopmentemulator", "").lower() == "true":
            if not namespace:
                raise ValueError(f"{label['namespace']} is empty: the local endpoint serves its Schema Registry on a port "
                                 f"of its own; set it to <host>:<registry port>, e.g. 127.0.0.1:5681, and "
                                 f"{label['ca_bundle']} to the CA of the endpoint's certificate")
            if not (signature or (parts.get("sharedaccesskeyname") and key)):
                raise ValueError(f"{label['connection_string']} has neither SharedAccessKeyName and SharedAccessKey nor "
                                 "SharedAccessSignature")
            return SchemaRegistryEndpoint(namespace, "shared_access_key", key_name=parts.get("sharedaccesskeyname"),
                                          key=key, signature=signature, **common)
        return SchemaRegistryEndpoint(namespace or canonical_namespace(endpoint_host), "default_azure_credential", **common)
    host = (host or "").split("://", 1)[-1].strip().strip("/")
    if not (namespace or host):
        raise ValueError(f"set {label['host']} or {label['namespace']}")
    if client_id and client_secret:
        if not tenant_id:
            raise ValueError(f"{label['client']} are set but {label['tenant_id']} is empty")
        return SchemaRegistryEndpoint(namespace or canonical_namespace(host), "client_secret", tenant_id=tenant_id,
                                      client_id=client_id, client_secret=client_secret, **common)
    return SchemaRegistryEndpoint(namespace or canonical_namespace(host), "default_azure_credential", **common)
