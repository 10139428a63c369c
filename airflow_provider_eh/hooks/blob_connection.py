"""How a ``wasb`` connection resolves to an Azure Blob account, a credential and a network path.

The fields are those of the Azure provider's ``wasb`` connection, so an existing connection works
unchanged, with or without that provider installed. The type stays the Azure provider's: this
package does not register ``wasb`` (Airflow would then route every ``wasb`` connection's form, hook
and connection test here), it only reads such connections.

**The same credential as ``WasbHook``.** A connection resolves to the account URL and the credential
the Azure provider's ``WasbHook.get_conn`` gives it, tried in its fixed order (logged):

1. ``connection_string`` (extra, secret) — also Azurite's;
2. ``tenant_id`` (extra) with login (client id) and password (client secret): ``ClientSecretCredential``
   (``client_secret_auth_config``, extra, holds more of its arguments);
3. ``shared_access_key`` (extra) as the account key;
4. ``sas_token`` (extra, secret): an ``AzureSasCredential``, or a full SAS URL in ``sas_token``;
5. the password as the account key, then the ``account_key`` extra;
6. ``DefaultAzureCredential`` (a managed identity, workload identity, the environment...), with
   ``managed_identity_client_id`` and ``workload_identity_tenant_id`` (extra).

The account URL is the host (``https://`` added when it names none), else
``https://<login>.blob.core.windows.net/``. ``tests/unit/hooks/test_wasb_parity.py`` builds every
form with this hook and with the real ``WasbHook`` (sync and async) and compares the account URL, the
account name and the credential's type and secret.

Why this resolution is the package's own rather than a call to ``WasbHook``: the Azure provider is
not a dependency (a plain install has no ``WasbHook``), and a connection must reach the same account
whether or not it is installed, not fall back to a second rulebook where it is missing; the
provider's hook also leaves out what this one adds, the network fields below and the masking of a
connection string's key. Where they part, deliberately, this hook is the stricter or the one that
works: a service principal without its client id, its secret or the account URL is refused here
(``WasbHook`` would fail at the first token, or take the client id for the account name); a
``managed_identity_client_id`` alone selects that identity (``WasbHook`` uses it only together with
``workload_identity_tenant_id``); a host without a dot (``localhost``, a local emulator) is kept
(``WasbHook`` replaces it by the login's Azure URL); an ``http://`` SAS URL (Azurite) is taken as a
URL; and extras are not handed to the client as keyword arguments.

The network path takes the ``azure_event_hubs`` connection's field names: ``proxy_host``,
``proxy_port``, ``proxy_username``, ``proxy_password`` (an HTTP proxy) and ``ca_bundle`` (a PEM file of
CAs to trust); the Azure provider's ``proxies`` extra (``{"https": "http://user:pass@host:port"}``) is
read too, and the fields win over it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow_provider_eh.client.failures import FailureSite, StoreRole
from airflow_provider_eh.client.network import NetworkOptions
from airflow_provider_eh.errors import ConnectionConfigError, ConnectionUnreachableError
from airflow_provider_eh.hooks._connection import extra_field, masked

if TYPE_CHECKING:
    pass

CONN_TYPE = "wasb"

#: the fields to check when the account refuses a credential, by the credential used (``_service_kwargs``'s ``how``)
CREDENTIAL_FIELDS = {
    "connection_string": "the AccountKey or SharedAccessSignature of connection_string",
    "client_secret": "login (client id), password (client secret) and tenant_id, and the principal's Storage Blob "
                     "Data Contributor role on the account",
    "account_key": "the account key (shared_access_key, password or account_key)",
    "sas_token": "sas_token (its permissions and expiry)",
    "sas_url": "sas_token (its permissions and expiry)",
    "default_azure_credential": "the identity DefaultAzureCredential finds, and its Storage Blob Data Contributor "
                                "role on the account",
}


def account_url_of(host: str | None, login: str | None) -> str:
    """The account URL of a ``wasb`` connection: the host (``https://`` added when it names no scheme), else
    ``https://<login>.blob.core.windows.net/``; empty without either."""
    url = (host or "").strip()
    if not url:
        return f"https://{login}.blob.core.windows.net/" if login else ""
    return url if "://" in url else f"https://{url}"


def account_options(account_url: str) -> dict[str, str]:
    """delta-rs options naming the account of ``account_url``: its name, and its endpoint unless it is Azure's own."""
    parsed = urlparse(account_url)
    host = parsed.hostname or ""
    if host.endswith(".blob.core.windows.net"):
        return {"azure_storage_account_name": host.split(".")[0]}
    path = [part for part in parsed.path.split("/") if part]
    name = path[0] if path and (host in ("localhost", "127.0.0.1") or host.replace(".", "").isdigit()) else host.split(".")[0]
    options = {"azure_storage_account_name": name,
               "azure_storage_endpoint": f"{parsed.scheme}://{parsed.netloc}{parsed.path}".rstrip("/")}
    if parsed.scheme == "http":
        options["allow_http"] = "true"
    return options


def options_of_connection_string(conn_str: str) -> dict[str, str]:
    """delta-rs options of an Azure Storage connection string (``AccountName``, ``AccountKey``, ``BlobEndpoint``,
    ``SharedAccessSignature``, ``UseDevelopmentStorage``)."""
    parts = {}
    for part in conn_str.split(";"):
        name, _, value = part.partition("=")
        if name.strip():
            parts[name.strip().lower()] = value.strip()
    if parts.get("usedevelopmentstorage", "").lower() == "true":
        return {"azure_storage_use_emulator": "true"}
    account = parts.get("accountname", "")
    endpoint = parts.get("blobendpoint")
    if not endpoint and account:
        protocol = parts.get("defaultendpointsprotocol", "https")
        endpoint = f"{protocol}://{account}.blob.{parts.get('endpointsuffix', 'core.windows.net')}"
    options = account_options(endpoint) if endpoint else {}
    if account:
        options["azure_storage_account_name"] = account
    if parts.get("accountkey"):
        options["azure_storage_account_key"] = parts["accountkey"]
    if parts.get("sharedaccesssignature"):
        options["azure_storage_sas_token"] = parts["sharedaccesssignature"].lstrip("?")
    return options


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
        """``(how, kwargs)`` where ``kwargs`` build a BlobServiceClient; ``how`` names the credential used
        (the order of the module docstring, ``WasbHook``'s)."""
        extras = conn.extra_dejson or {}
        conn_str = masked(extra_field(extras, CONN_TYPE, "connection_string"))
        if conn_str:
            for part in conn_str.split(";"):
                name, _, value = part.partition("=")
                if name.strip().lower() in ("accountkey", "sharedaccesssignature"):
                    masked(value.strip())
            return "connection_string", {"conn_str": conn_str}
        how, credential = self._credential(conn, extras, aio=aio)
        if how == "sas_url":
            return how, {"account_url": credential}
        account_url = account_url_of(conn.host, conn.login or "")
        if not account_url:
            raise ConnectionConfigError(
                self.wasb_conn_id, f"{how.replace('_', ' ')} needs the account URL in host or the account name in login"
            )
        return how, {"account_url": account_url, "credential": credential}

    def _credential(self, conn: Any, extras: dict[str, Any], *, aio: bool) -> tuple[str, Any]:
        """``(how, credential)`` of the fields after the connection string, in ``WasbHook``'s order; for a full
        SAS URL in ``sas_token``, ``("sas_url", the URL)``."""
        tenant_id = extra_field(extras, CONN_TYPE, "tenant_id")
        if tenant_id:
            return "client_secret", self._service_principal(conn, extras, tenant_id, aio=aio)
        shared_access_key = masked(extra_field(extras, CONN_TYPE, "shared_access_key"))
        if shared_access_key:
            return "account_key", shared_access_key
        sas_token = masked(extra_field(extras, CONN_TYPE, "sas_token"))
        if sas_token:
            if sas_token.startswith(("https://", "http://")):
                return "sas_url", sas_token
            from azure.core.credentials import AzureSasCredential

            return "sas_token", AzureSasCredential(sas_token.lstrip("?"))
        key = masked(conn.password or extra_field(extras, CONN_TYPE, "account_key"))
        if not account_url_of(conn.host, conn.login or ""):
            raise ConnectionConfigError(
                self.wasb_conn_id,
                "set 'connection_string', or the account URL (host) or account name (login) with a key, "
                "SAS token, client secret or DefaultAzureCredential",
            )
        if key:
            return "account_key", key
        return "default_azure_credential", _default_credential(extras, aio=aio)

    def _service_principal(self, conn: Any, extras: dict[str, Any], tenant_id: str, *, aio: bool) -> Any:
        """The ``ClientSecretCredential`` of ``tenant_id`` with login (client id) and password (client secret)."""
        if not (conn.login and conn.password):
            raise ConnectionConfigError(
                self.wasb_conn_id, "field 'tenant_id' selects a service principal: set its client id as login and its "
                                   "client secret as password (or remove tenant_id)"
            )
        if not (conn.host or "").strip():
            raise ConnectionConfigError(self.wasb_conn_id, "a service principal needs the account URL in the host "
                                                           "field (login is its client id)")
        masked(conn.password)
        if aio:
            from azure.identity.aio import ClientSecretCredential
        else:
            from azure.identity import ClientSecretCredential  # type: ignore[assignment]
        options = extra_field(extras, CONN_TYPE, "client_secret_auth_config") or {}
        if not isinstance(options, dict):
            raise ConnectionConfigError(self.wasb_conn_id, "field 'client_secret_auth_config' must be an object")
        return ClientSecretCredential(tenant_id, conn.login, conn.password, **options)

    def _failure_site(self, conn: Any, how: str, account_url: str, *, container: str | None, container_field: str,
                      role: StoreRole, done: str) -> FailureSite:
        extras = conn.extra_dejson or {}
        host, port = extra_field(extras, CONN_TYPE, "proxy_host"), extra_field(extras, CONN_TYPE, "proxy_port")
        proxies = extra_field(extras, CONN_TYPE, "proxies")
        proxy = None
        if host and port:
            proxy = f"{str(host).split('://', 1)[-1]}:{port}"
        elif isinstance(proxies, dict) and proxies:
            from urllib.parse import urlparse

            url = urlparse(str(proxies.get("https") or next(iter(proxies.values()))))
            proxy = f"{url.hostname}:{url.port or 80}" if url.hostname else None  # no user or password
        return FailureSite.of_blob(
            self.wasb_conn_id, account_url, container=container, container_field=container_field, proxy=proxy,
            ca_bundle=extra_field(extras, CONN_TYPE, "ca_bundle") or None,
            credential_fields=CREDENTIAL_FIELDS.get(how, "the connection's credential"), role=role, done=done,
        )

    def _unreachable(self, exc: BaseException, what: str) -> ConnectionUnreachableError:
        return ConnectionUnreachableError(
            self.wasb_conn_id, f"{what} failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        )


def _default_credential(extras: dict[str, Any], *, aio: bool) -> Any:
    """``DefaultAzureCredential`` with the connection's ``managed_identity_client_id`` and
    ``workload_identity_tenant_id``."""
    if aio:
        from azure.identity.aio import DefaultAzureCredential
    else:
        from azure.identity import DefaultAzureCredential  # type: ignore[assignment]
    identity: dict[str, Any] = {"managed_identity_client_id": extra_field(extras, CONN_TYPE, "managed_identity_client_id")}
    workload_tenant = extra_field(extras, CONN_TYPE, "workload_identity_tenant_id")
    if workload_tenant:
        identity.update(workload_identity_tenant_id=workload_tenant, additionally_allowed_tenants=[workload_tenant])
    return DefaultAzureCredential(**identity)


def pooled_transport(size: int, connection_verify: Any = None) -> Any:
    """The Azure SDK's ``requests`` transport with ``size`` connections kept per host, retries left to the SDK's
    policy as its own transport does; ``connection_verify`` (a CA bundle) is the transport's to apply."""
    import requests
    from azure.core.pipeline.transport import RequestsTransport
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=size, pool_maxsize=size,
                          max_retries=Retry(total=False, redirect=False, raise_on_status=False))
    for scheme in ("http://", "https://"):
        session.mount(scheme, adapter)
    verify = {} if connection_verify is None else {"connection_verify": connection_verify}
    return RequestsTransport(session=session, session_owner=True, **verify)
