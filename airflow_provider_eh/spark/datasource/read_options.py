"""The options of ``spark.read.format("eventhubs")`` and ``spark.readStream.format("eventhubs")``; no Spark.

The hub and its credential take the writer's option names (:mod:`.options`). The positions take
``startingPosition(s)`` and ``endingPosition(s)`` (:mod:`.positions`); the Scala connector's
``eventhubs.``-prefixed names of the options both connectors have are read as well
(``eventhubs.consumerGroup``, ``eventhubs.startingPositions``, ``maxEventsPerTrigger``, ...), so a job
moving from it keeps its positions. A missing or bad option fails on the driver, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_eh.client.endpoint import EventHubsEndpoint, parse_connection_string
from airflow_provider_eh.errors import DataSourceOptionError
from airflow_provider_eh.spark.datasource.options import BlobLocation, _endpoint, _Options, _registry
from airflow_provider_eh.spark.datasource.positions import EARLIEST, LATEST, Position, parse_position, parse_positions

#: the Scala connector's prefix, read as an alias of the same option without it
SCALA_PREFIX = "eventhubs."
_DECODE_ERRORS = ("fail", "null")


class _ReadOptions(_Options):
    """The writer's reading of options, with the Scala connector's ``eventhubs.`` names as aliases."""

    def text(self, name: str, default: str | None = None) -> str | None:
        found = super().text(name)
        if found is None:
            found = super().text(SCALA_PREFIX + name)
        return default if found is None else found

    def flag(self, name: str, default: bool) -> bool:
        raw = (self.text(name) or str(default)).lower()
        if raw not in ("true", "false"):
            raise DataSourceOptionError(f"option {name!r} is {raw!r}: give true or false")
        return raw == "true"


@dataclass(frozen=True)
class TypedRead:
    """
    Decoding bodies into typed columns (``decoded``): a schema to type them by, and the registry of ids.

    :param definition: the schema's definition (JSON text): Avro, or a JSON Schema with ``format`` ``Json``.
    :param format: ``"Avro"`` or ``"Json"``.
    :param registry: the Schema Registry that resolves the schema ids events carry (``None``: JSON bodies only).
    :param decode_errors: ``"fail"``: an event that does not decode fails the read naming it; ``"null"``: its
        ``decoded`` is null and ``decodeError`` says why.
    """

    definition: str
    format: str
    registry: Any = field(default=None, repr=False)
    decode_errors: str = "fail"


@dataclass(frozen=True)
class ReadOptions:
    """
    Everything a read needs, from the data source's options (:meth:`from_options`).

    :param endpoint: the hub.
    :param consumer_group: the consumer group read as (``consumerGroup``).
    :param starting: per partition, where to start (``startingPositions``, else ``startingPosition``).
    :param starting_default: where partitions without their own start begin (``startingPosition``).
    :param ending: per partition, where a batch read ends (``endingPositions``, else ``endingPosition``).
    :param ending_default: where partitions without their own end stop (default: the hub's end when planned).
    :param max_events_per_trigger: events of all partitions in one micro-batch at most (``maxEventsPerTrigger``).
    :param max_events_per_partition: events of one partition in one micro-batch at most (``maxEventsPerPartition``).
    :param receive_timeout: seconds a task waits for the next event of its range before it fails (``receiveTimeout``).
    :param max_batch_size: events per receive call (``maxBatchSize``).
    :param prefetch: the link's prefetch count (``prefetchCount``).
    :param fail_on_data_loss: fail when events of a range are gone from the hub (``failOnDataLoss``).
    :param system_properties: add the ``systemProperties`` column (``includeSystemProperties``; reads through the
        SDK's ``EventData``, slower).
    :param typed: decode bodies into typed columns (``schema`` and the options beside it).
    :param checkpoints: write each partition's progress as a consumer-group checkpoint in this container at
        each commit (``checkpointContainer``); ``None``: none.
    """

    endpoint: EventHubsEndpoint
    consumer_group: str = "$Default"
    starting: Mapping[str, Position] = field(default_factory=dict)
    starting_default: Position = Position(EARLIEST)
    ending: Mapping[str, Position] = field(default_factory=dict)
    ending_default: Position = Position(LATEST)
    max_events_per_trigger: int | None = None
    max_events_per_partition: int | None = None
    receive_timeout: float = 60.0
    max_batch_size: int = 1000
    prefetch: int | None = None
    fail_on_data_loss: bool = True
    system_properties: bool = False
    typed: TypedRead | None = None
    checkpoints: BlobLocation | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ReadOptions:
        """Read and check the options; :class:`DataSourceOptionError` names the first one at fault."""
        opts = _ReadOptions(options)
        endpoint = _endpoint(opts, "read from")
        hub = endpoint.eventhub_name
        return cls(
            endpoint=endpoint,
            consumer_group=opts.text("consumerGroup", "$Default") or "$Default",
            starting=parse_positions(opts.text("startingPositions"), hub, "startingPositions"),
            starting_default=parse_position(opts.text("startingPosition", EARLIEST), "option 'startingPosition'"),
            ending=parse_positions(opts.text("endingPositions"), hub, "endingPositions"),
            ending_default=parse_position(opts.text("endingPosition", LATEST), "option 'endingPosition'"),
            max_events_per_trigger=opts.number("maxEventsPerTrigger", None, low=1),
            max_events_per_partition=opts.number("maxEventsPerPartition", None, low=1),
            receive_timeout=opts.number("receiveTimeout", opts.number("receiverTimeout", 60.0, whole=False, low=1),
                                        whole=False, low=1),
            max_batch_size=opts.number("maxBatchSize", 1000, low=1),
            prefetch=opts.number("prefetchCount", None, low=1),
            fail_on_data_loss=opts.flag("failOnDataLoss", True),
            system_properties=opts.flag("includeSystemProperties", False),
            typed=_typed(opts, endpoint),
            checkpoints=_checkpoints(opts, endpoint),
        )

    def start_of(self, partition_id: str) -> Position:
        return self.starting.get(partition_id, self.starting_default)

    def end_of(self, partition_id: str) -> Position:
        return self.ending.get(partition_id, self.ending_default)


def _typed(opts: _ReadOptions, endpoint: EventHubsEndpoint) -> TypedRead | None:
    definition, name, group = opts.text("schema"), opts.text("schemaName"), opts.text("schemaGroup")
    if not (definition or name):
        if group:
            raise DataSourceOptionError(f"option 'schemaGroup' is {group!r}: give the schema too, as option 'schema' "
                                        "(its definition, JSON text) or 'schemaName' (one registered in the group)")
        return None
    fmt = (opts.text("schemaFormat", "Avro") or "Avro").capitalize()
    if fmt not in ("Avro", "Json"):
        raise DataSourceOptionError(f"option 'schemaFormat' is {fmt!r}: give Avro or Json")
    decode_errors = (opts.text("decodeErrors", "fail") or "fail").lower()
    if decode_errors not in _DECODE_ERRORS:
        raise DataSourceOptionError(f"option 'decodeErrors' is {decode_errors!r}: give 'fail' or 'null'")
    registry = _registry(opts, endpoint) if opts.text("schemaRegistryNamespace") or name or fmt == "Avro" else None
    if not definition:
        if not group:
            raise DataSourceOptionError(f"option 'schemaName' is {name!r} but 'schemaGroup' is not set: name the "
                                        "Schema Registry group that holds it")
        definition = _registered(registry, group, str(name))
    return TypedRead(definition, fmt, registry, decode_errors)


def _registered(registry: Any, group: str, name: str) -> str:
    """The latest registered definition of ``name`` in ``group`` (on the driver, once)."""
    from airflow_provider_eh.extras import require_extra

    require_extra("schemaregistry", "typed columns (option 'schemaName')")
    versions = registry.schema_versions(group, name)
    if not versions:
        raise DataSourceOptionError(f"option 'schemaName': schema {name!r} is not in group {group!r} of the Schema "
                                    "Registry; register it, or give its definition as option 'schema'")
    with registry.client() as client:
        return str(client.get_schema(group_name=group, name=name, version=versions[-1]).definition)


def _checkpoints(opts: _ReadOptions, endpoint: EventHubsEndpoint) -> BlobLocation | None:
    container = opts.text("checkpointContainer")
    conn_str, account_url = opts.text("checkpointConnectionString"), opts.text("checkpointAccountUrl")
    if not container:
        if conn_str or account_url:
            raise DataSourceOptionError("option 'checkpointContainer' is missing: the blob container to write the "
                                        "consumer group's checkpoints in")
        return None
    if bool(conn_str) == bool(account_url):
        raise DataSourceOptionError(
            "with option 'checkpointContainer', give exactly one of 'checkpointConnectionString' (a storage account's "
            "connection string) and 'checkpointAccountUrl' (https://<account>.blob.core.windows.net, with "
            "'checkpointSasToken', 'checkpointAccountKey' or the Entra credential options)")
    if conn_str:
        try:
            parse_connection_string(conn_str)
        except ValueError as exc:
            raise DataSourceOptionError(f"option 'checkpointConnectionString' is not a connection string: {exc}") from None
    return BlobLocation(container=container, connection_string=conn_str, account_url=account_url,
                        sas_token=opts.text("checkpointSasToken"), account_key=opts.text("checkpointAccountKey"),
                        tenant_id=endpoint.tenant_id, client_id=endpoint.client_id, client_secret=endpoint.client_secret,
                        managed_identity_client_id=endpoint.managed_identity_client_id)
