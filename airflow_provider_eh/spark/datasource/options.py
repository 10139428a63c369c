"""The options of the ``eventhubs`` data source, read once into frozen records; no Spark, no Airflow.

Spark hands a data source its options as strings under case-insensitive names
(``.option("producerGroup", "orders.daily")``). :class:`WriteOptions` turns them into what the engine
takes: the hub (:class:`~airflow_provider_eh.client.endpoint.EventHubsEndpoint`), where producer state and
staged rows live (:class:`BlobLocation`), the row mapping
(:class:`~airflow_provider_eh.spark.mapping.RowMapping`) and the publisher's settings. A missing or bad
option fails on the driver, before any task runs, naming the option and what it accepts.
Secrets (connection strings, client secrets, account keys, SAS tokens) stay out of ``repr``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.client.endpoint import EventHubsEndpoint, entra_credential, parse_connection_string
from airflow_provider_eh.client.network import NetworkOptions
from airflow_provider_eh.errors import DataSourceOptionError
from airflow_provider_eh.publishing.in_flight import DEFAULT_LEASE_ONLY_BATCH_BYTES, check_lease_only_batch_bytes
from airflow_provider_eh.spark.mapping import RowMapping

if TYPE_CHECKING:
    from airflow_provider_eh.publishing.typed import RowEncoder

__all__ = ["FORMAT", "BlobLocation", "DataSourceOptionError", "WriteOptions", "identity_batch_id"]

#: the format name: ``df.write.format(FORMAT)``
FORMAT = "eventhubs"

#: the network options, by the data source's name and the connection field's
_NETWORK = {"transport": "transport", "proxyHost": "proxy_host", "proxyPort": "proxy_port",
            "proxyUsername": "proxy_username", "proxyPassword": "proxy_password",
            "customEndpointAddress": "custom_endpoint_address", "caBundle": "ca_bundle"}
_FENCING: dict[str, str | bool] = {"auto": "auto", "required": "required", "false": False, "off": False, "none": False}


class _Options:
    """Case-insensitive reading of Spark's string options, each error naming the option."""

    def __init__(self, options: Mapping[str, Any]):
        self._values = {str(k).lower(): v for k, v in options.items()}

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self._values.get(name.lower())
        if value is None:
            return default
        value = str(value).strip()
        return value or default

    def required(self, name: str, what: str) -> str:
        value = self.text(name)
        if value is None:
            raise DataSourceOptionError(f"option {name!r} is missing: {what}")
        return value

    def number(self, name: str, default: float | None, *, whole: bool = True, low: float | None = None) -> Any:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value: float = int(raw) if whole else float(raw)
        except ValueError:
            kind = "a whole number" if whole else "a number"
            raise DataSourceOptionError(f"option {name!r} is {raw!r}: give {kind}") from None
        if low is not None and value < low:
            raise DataSourceOptionError(f"option {name!r} is {raw!r}: give {low:g} or more")
        return value

    def columns(self, name: str) -> tuple[str, ...]:
        raw = self.text(name)
        if raw is None:
            return ()
        if raw.startswith("["):  # a JSON list, for column names with commas
            try:
                names = json.loads(raw)
            except ValueError:
                raise DataSourceOptionError(f"option {name!r} is {raw!r}: a JSON list of column names, or names "
                                            "separated by commas") from None
            return tuple(str(n) for n in names)
        return tuple(n.strip() for n in raw.split(",") if n.strip())


def _serializer(spec: str) -> Callable[[dict[str, Any]], Any]:
    """``module:function`` (or ``module.function``), importable where the executors run."""
    module, sep, attr = spec.partition(":")
    if not sep:
        module, _, attr = spec.rpartition(".")
    try:
        function: Callable[[dict[str, Any]], Any] = getattr(importlib.import_module(module), attr)
        return function
    except (ImportError, AttributeError, ValueError) as exc:
        raise DataSourceOptionError(
            f"option 'serializer' is {spec!r}: {type(exc).__name__}: {exc}. Give 'package.module:function', a function "
            "taking the row as a dict, importable on the driver and the executors (ship it with --py-files)"
        ) from None


@dataclass(frozen=True)
class BlobLocation:
    """
    A blob container, reached from wherever the job runs: the producer state (ledger) and staged rows.

    :param container: the container's name.
    :param connection_string: a storage connection string (``stateConnectionString``).
    :param account_url: ``https://<account>.blob.core.windows.net`` (``stateAccountUrl``), with
        ``sas_token``, ``account_key`` or, when neither, the Entra credential of the hub's options.
    """

    container: str
    connection_string: str | None = field(default=None, repr=False)
    account_url: str | None = None
    sas_token: str | None = field(default=None, repr=False)
    account_key: str | None = field(default=None, repr=False)
    tenant_id: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    managed_identity_client_id: str | None = None

    def container_client(self, **kwargs: Any) -> Any:
        """A new ``azure.storage.blob.ContainerClient`` of the container."""
        from azure.storage.blob import ContainerClient

        if self.connection_string:
            return ContainerClient.from_connection_string(self.connection_string, self.container, **kwargs)
        assert self.account_url is not None
        credential: Any
        if self.sas_token:
            credential = self.sas_token
        elif self.account_key:
            account = self.account_url.split("://", 1)[-1].split(".", 1)[0]
            credential = {"account_name": account, "account_key": self.account_key}
        else:
            kind = "client_secret" if self.tenant_id and self.client_id and self.client_secret else "default"
            credential = entra_credential(kind, self.tenant_id, self.client_id, self.client_secret,
                                          self.managed_identity_client_id)
        return ContainerClient(self.account_url, self.container, credential=credential, **kwargs)


def _endpoint(opts: _Options, purpose: str = "publish to") -> EventHubsEndpoint:
    """The hub of the options; ``purpose`` says what the hub is for in the errors ("publish to", "read from")."""
    network_fields = {field_name: opts.text(option) for option, field_name in _NETWORK.items()}
    try:
        network = NetworkOptions.from_fields({k: v for k, v in network_fields.items() if v is not None})
    except ValueError as exc:  # name the option, not the connection field
        message = str(exc).replace("fields '", "options '").replace("field '", "option '")
        for option, field_name in _NETWORK.items():
            message = message.replace(f"'{field_name}'", f"'{option}'")
        raise DataSourceOptionError(message) from None
    hub = opts.text("eventHubName")
    conn_str = opts.text("connectionString")
    if conn_str:
        try:
            return EventHubsEndpoint.from_connection_string(conn_str, hub, network=network)
        except ValueError as exc:
            raise DataSourceOptionError(f"option 'connectionString': {exc} (or give option 'eventHubName')") from None
    namespace = opts.text("fullyQualifiedNamespace")
    if not namespace:
        raise DataSourceOptionError(
            f"no hub to {purpose}: give option 'connectionString' (a SAS connection string of the namespace or hub), "
            "or 'fullyQualifiedNamespace' (<namespace>.servicebus.windows.net) with 'eventHubName' and, for a service "
            "principal, 'tenantId', 'clientId' and 'clientSecret' (else the cluster's managed identity or "
            "DefaultAzureCredential is used)"
        )
    if not hub:
        raise DataSourceOptionError(f"option 'eventHubName' is missing: the hub to {purpose}")
    return EventHubsEndpoint(
        fully_qualified_namespace=namespace.split("://", 1)[-1].strip("/"), eventhub_name=hub,
        tenant_id=opts.text("tenantId"), client_id=opts.text("clientId"), client_secret=opts.text("clientSecret"),
        managed_identity_client_id=opts.text("managedIdentityClientId"), network=network,
    )


def _blob(opts: _Options) -> BlobLocation:
    container = opts.required(
        "stateContainer", "the blob container that holds the producer state (the ledger) and the staged rows; the "
        "same container the Airflow tasks of this producer group use"
    )
    conn_str = opts.text("stateConnectionString")
    account_url = opts.text("stateAccountUrl")
    if bool(conn_str) == bool(account_url):
        raise DataSourceOptionError(
            "give exactly one of option 'stateConnectionString' (a storage account's connection string) and "
            "'stateAccountUrl' (https://<account>.blob.core.windows.net, with 'stateSasToken', 'stateAccountKey' or "
            "the Entra credential options)"
        )
    if conn_str:
        try:
            parse_connection_string(conn_str)
        except ValueError as exc:
            raise DataSourceOptionError(f"option 'stateConnectionString' is not a connection string: {exc}") from None
    return BlobLocation(
        container=container, connection_string=conn_str, account_url=account_url,
        sas_token=opts.text("stateSasToken"), account_key=opts.text("stateAccountKey"),
        tenant_id=opts.text("tenantId"), client_id=opts.text("clientId"), client_secret=opts.text("clientSecret"),
        managed_identity_client_id=opts.text("managedIdentityClientId"),
    )


def _mapping(opts: _Options) -> RowMapping:
    spec = opts.text("serializer")
    serializer = _serializer(spec) if spec else None
    try:
        return RowMapping(
            body_column=opts.text("bodyColumn"),
            serializer=serializer,
            property_columns=opts.columns("propertyColumns"),
            partition_column=opts.text("partitionColumn"),
            key_column=opts.text("keyColumn"),
            order_by=opts.columns("orderBy"),
        )
    except ValueError as exc:
        message = str(exc)
        for python, option in (("body_column", "bodyColumn"), ("partition_column", "partitionColumn"),
                               ("key_column", "keyColumn")):
            message = message.replace(python, f"option '{option}'")
        raise DataSourceOptionError(message.replace("serializer", "option 'serializer'")) from None


@dataclass(frozen=True)
class SchemaOptions:
    """
    Typed events: each body encoded against a schema of the namespace's Schema Registry by Microsoft's encoder.

    :param group: the registry's schema group (``schemaGroup``).
    :param definition: the schema's definition as JSON text (``schema``), or ``None`` with ``name``.
    :param name: a schema registered already, its latest version used (``schemaName``).
    :param format: ``"Avro"`` or ``"Json"`` (``schemaFormat``).
    :param auto_register: register the definition when the group does not hold it (``autoRegisterSchema``).
    :param compatibility: check against the latest registered version first (``schemaCompatibility``).
    :param registry: where the registry is and how to authenticate (the hub's credential; ``schemaRegistryNamespace``).
    """

    group: str
    definition: str | None
    name: str | None
    format: str
    auto_register: bool
    compatibility: str
    registry: Any = field(repr=False)

    def encoder(self) -> RowEncoder:
        """Resolve the schema in the registry (on the driver, once) and return the encoder executors run."""
        from airflow_provider_eh.extras import require_extra
        from airflow_provider_eh.publishing.typed import RowEncoder, resolve_schema

        require_extra("schemaregistry", "typed events (option 'schemaGroup')")
        with self.registry.client() as client:
            definition, used = resolve_schema(client, self.group, self.format, definition=self.definition,
                                              schema_name=self.name, auto_register=self.auto_register,
                                              versions=self.registry.schema_versions, compatibility=self.compatibility)
        return RowEncoder(definition, used)


def _schema(opts: _Options, endpoint: EventHubsEndpoint) -> SchemaOptions | None:
    from airflow_provider_eh.publishing.typed import compatibility_mode, load_definition, schema_format

    group = opts.text("schemaGroup")
    definition, name = opts.text("schema"), opts.text("schemaName")
    if not group:
        given = [n for n, v in (("schema", definition), ("schemaName", name)) if v]
        if given:
            raise DataSourceOptionError(f"option {given[0]!r} is set but 'schemaGroup' is not: name the Schema Registry "
                                        "group of the schema")
        return None
    if not (definition or name):
        raise DataSourceOptionError(f"option 'schemaGroup' is {group!r}: give the schema too, as option 'schema' (its "
                                    "definition, JSON text) or 'schemaName' (one registered already)")
    try:
        fmt = schema_format(opts.text("schemaFormat", "Avro"))
        compatibility = compatibility_mode(opts.text("schemaCompatibility", "None"))
        definition = load_definition(definition) if definition else None
    except ValueError as exc:
        message = str(exc)
        for python, option in (("schema_format", "option 'schemaFormat'"), ("schema_compatibility",
                               "option 'schemaCompatibility'"), ("`schema`", "option 'schema'"), ("schema=", "schema=")):
            message = message.replace(python, option)
        raise DataSourceOptionError(message) from None
    auto = (opts.text("autoRegisterSchema") or "false").lower()
    if auto not in ("true", "false"):
        raise DataSourceOptionError(f"option 'autoRegisterSchema' is {auto!r}: give true or false")
    return SchemaOptions(group, definition, name, fmt, auto == "true", compatibility, _registry(opts, endpoint))


def _registry(opts: _Options, endpoint: EventHubsEndpoint) -> Any:
    """The Schema Registry of the options (``schemaRegistryNamespace``, else the hub's), with the hub's credential."""
    from airflow_provider_eh.client.schema_registry import registry_endpoint

    try:
        return registry_endpoint(
            namespace=opts.text("schemaRegistryNamespace"), connection_string=endpoint.connection_string,
            host=endpoint.fully_qualified_namespace, tenant_id=endpoint.tenant_id, client_id=endpoint.client_id,
            client_secret=endpoint.client_secret, ca_bundle=endpoint.network.ca_bundle,
            managed_identity_client_id=endpoint.managed_identity_client_id, names=_REGISTRY_NAMES)
    except ValueError as exc:
        raise DataSourceOptionError(str(exc)) from None


#: how the registry's inputs are named in errors: the data source's options
_REGISTRY_NAMES = {"connection_string": "option 'connectionString'", "namespace": "option 'schemaRegistryNamespace'",
                   "ca_bundle": "option 'caBundle'", "tenant_id": "option 'tenantId'",
                   "host": "option 'fullyQualifiedNamespace'", "client": "options 'clientId' and 'clientSecret'"}


def _lease_only_bytes(opts: _Options) -> int:
    value = opts.number("leaseOnlyBatchBytes", DEFAULT_LEASE_ONLY_BATCH_BYTES)
    try:
        return check_lease_only_batch_bytes(value, "option 'leaseOnlyBatchBytes'")
    except ValueError as exc:
        message = str(exc).replace("option 'leaseOnlyBatchBytes'=", "option 'leaseOnlyBatchBytes' is ")
        raise DataSourceOptionError(message) from None


def identity_batch_id(producer_group: str, identity: str, generation: int = 0) -> str:
    """
    The 64-hex batch id of the data source's write ``identity`` (an interval, a run's key, a stream's batch).

    The same group, identity and generation give the same id wherever it is computed: in the Spark job, in
    an Airflow task that waits for the batch (:func:`~airflow_provider_eh.publishing.committed_results`).
    """
    material = json.dumps(["eh-datasource-v1", producer_group, identity, int(generation)])
    return hashlib.sha256(material.encode()).hexdigest()


def stream_identity(stream: str, batch: int) -> str:
    """The identity of a streaming query's micro-batch ``batch`` (``stream``: its checkpoint or ``streamId``)."""
    return f"stream:{stream}:batch:{int(batch)}"


@dataclass(frozen=True)
class WriteOptions:
    """
    Everything a write needs, from the data source's options (:meth:`from_options`).

    :param endpoint: the hub.
    :param blob: the container of the producer state and the staged rows.
    :param mapping: row → event.
    :param producer_group: the publishing step's stable name (``producerGroup``).
    :param identity: what makes the write one batch (``batchId``; a stream: its checkpoint or ``streamId``).
    :param generation: raise it to publish the same identity again on purpose (``generation``).
    :param hub_fencing: ``"auto"``, ``"required"`` or ``False`` (``hubFencing``).
    :param lease_only_batch_bytes: the bound of one SDK batch where the lease alone fences (``leaseOnlyBatchBytes``).
    :param send_timeout: seconds one SDK batch may take (``sendTimeout``).
    :param send_attempts: attempts per partition on transient errors within one write (``sendAttempts``).
    :param claim_timeout: seconds to wait for another publisher's lease (``claimTimeout``); ``None``: the store's default.
    :param lease_seconds: the blob lease's duration, 15 to 60 (``leaseSeconds``).
    :param keep_committed: prune the ledger to this many batches per partition (``keepCommitted``); ``None``: keep all.
    :param max_workers: partitions sent at once by one commit process (``maxWorkers``); ``None``: all at once.
    :param commit_processes: processes the driver's commit publishes from, each partition from one
        (``commitProcesses``); ``None``: one per 20,000 events, up to the driver's cores.
    :param schema: typed events' schema (``schemaGroup`` and the options beside it); ``None``: untyped.
    """

    endpoint: EventHubsEndpoint
    blob: BlobLocation
    mapping: RowMapping
    producer_group: str
    identity: str | None
    generation: int = 0
    hub_fencing: str | bool = "auto"
    lease_only_batch_bytes: int = DEFAULT_LEASE_ONLY_BATCH_BYTES
    send_timeout: float = 60.0
    send_attempts: int = 3
    claim_timeout: float | None = None
    lease_seconds: int = 15
    keep_committed: int | None = None
    max_workers: int | None = None
    commit_processes: int | None = None
    schema: SchemaOptions | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, streaming: bool = False) -> WriteOptions:
        """Read and check the options; :class:`DataSourceOptionError` names the first one at fault."""
        opts = _Options(options)
        group = opts.required("producerGroup", "the publishing step's stable name, e.g. 'orders.daily_publish'; "
                                               "the ledger and the events' stamps are kept per group")
        if streaming:
            identity = opts.text("streamId") or opts.text("checkpointLocation")
            if identity is None:
                raise DataSourceOptionError(
                    "a streaming write needs option 'checkpointLocation' (the query's checkpoint, as for any "
                    "exactly-once sink) or 'streamId' (a stable name of the query); each micro-batch's identity is it "
                    "and the batch id"
                )
        else:
            identity = opts.required("batchId", "what makes this write one batch, stable across retries and re-runs: "
                                                "the data interval (e.g. '2026-05-01T00:00:00+00:00/2026-05-02T00:00:00"
                                                "+00:00'), never the time of the run")
        fencing_raw = (opts.text("hubFencing") or "auto").lower()
        if fencing_raw not in _FENCING:
            raise DataSourceOptionError(f"option 'hubFencing' is {fencing_raw!r}: give 'auto', 'required' or 'false'")
        lease_seconds = opts.number("leaseSeconds", 15)
        if not 15 <= lease_seconds <= 60:
            raise DataSourceOptionError(f"option 'leaseSeconds' is {lease_seconds}: give 15 to 60 (Azure Blob lease limits)")
        endpoint = _endpoint(opts)
        return cls(
            endpoint=endpoint, blob=_blob(opts), mapping=_mapping(opts), producer_group=group, schema=_schema(opts, endpoint),
            identity=identity, generation=opts.number("generation", 0, low=0),
            hub_fencing=_FENCING[fencing_raw],
            lease_only_batch_bytes=_lease_only_bytes(opts),
            send_timeout=opts.number("sendTimeout", 60.0, whole=False, low=1),
            send_attempts=opts.number("sendAttempts", 3, low=1),
            claim_timeout=opts.number("claimTimeout", None, whole=False, low=0),
            lease_seconds=lease_seconds,
            keep_committed=opts.number("keepCommitted", None, low=1),
            max_workers=opts.number("maxWorkers", None, low=1),
            commit_processes=opts.number("commitProcesses", None, low=1),
        )

    def typed(self) -> WriteOptions:
        """These options with the schema resolved into the mapping's encoder (a registry call; on the driver, once)."""
        if self.schema is None or self.mapping.encoder is not None:
            return self
        return replace(self, mapping=replace(self.mapping, encoder=self.schema.encoder()))

    def batch_id(self, micro_batch: int | None = None) -> str:
        """The batch id of this write (a stream's: of micro-batch ``micro_batch``)."""
        assert self.identity is not None
        identity = self.identity if micro_batch is None else stream_identity(self.identity, micro_batch)
        return identity_batch_id(self.producer_group, identity, self.generation)


def pyspark_missing(exc: ImportError) -> ImportError:
    """The error of a module of PySpark classes (the data source's writer and reader) imported without PySpark 4."""
    return ImportError("the eventhubs data source needs PySpark 4 (pyspark.sql.datasource): run it on a Spark 4 cluster, "
                       "or install airflow-provider-eh[spark]", name=exc.name)
