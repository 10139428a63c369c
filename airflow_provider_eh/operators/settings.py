"""The operators' settings: small frozen records, one per concern, that the operators take as arguments.

An operator's own signature names what the task is (a hub, a consumer group, a row function) and takes the rest
as one record per concern: where rows land (:class:`SqlSink`, :class:`DeltaSink`), where checkpoints are kept
(:class:`BlobCheckpoints`), how instances share a hub (:class:`Ownership`), how events are batched
(:class:`Batching`), when a run stops (:class:`IngestLimits`), in-order sessions (:class:`Sessions`), where
producer states are kept (:class:`ProducerState`), how a send is fenced and retried
(:class:`Delivery`), the schema of typed events (:class:`EventSchema`), and a Spark job's output
(:class:`SparkOutput`) and how its rows become events (:class:`EventMapping`). A record names its fields once for
every operator that takes it. Strings in a record are templated like the operator's own arguments.

    EventHubIngestOperator(
        task_id="load_orders",
        sink=SqlSink("orders", conn_id="warehouse"),
        checkpoints=BlobCheckpoints("checkpoints"),
        batching=Batching(seconds=1.0),
        limits=IngestLimits(max_duration=600),
    )
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.client.fencing import HubFencing, fencing_mode
from airflow_provider_eh.ingest.sinks.delta import APPEND, MERGE
from airflow_provider_eh.ingest.sinks.sql.tables import DEFAULT_PREFIX
from airflow_provider_eh.publishing.in_flight import DEFAULT_LEASE_ONLY_BATCH_BYTES, check_lease_only_batch_bytes
from airflow_provider_eh.stamps import SEQ as STAMP_SEQ

WASB_DEFAULT = "wasb_default"


def _names(value: Any) -> tuple[str, ...] | Any:
    """A sequence of column names as a tuple (a frozen record holds no list); a template string as it is."""
    if value is None or isinstance(value, str):
        return value
    return tuple(value)


def _one_of(record: str, field: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{record}({field}={value!r}): must be one of {', '.join(repr(a) for a in allowed)}")


@dataclass(frozen=True)
class SqlSink:
    """
    Rows into a SQL table; each batch one transaction with the partition's checkpoint, dedupe marks and dead letters.

    :param table: the target table; it must exist. (templated)
    :param conn_id: an Airflow SQL connection of type ``sqlite``, ``postgres`` or ``mysql`` (MySQL or MariaDB).
        (templated)
    :param state_table_prefix: prefix of the state tables (checkpoint, dedupe, dead_letter, session, deferred).
    :param evolve_columns: when a typed event's schema has a field the table has no column for (a new version
        gained it), add the column (``ALTER TABLE ... ADD COLUMN``) before the batch is written; ``False``: fail
        instead, naming the field and the column to add. A missing table is created from the schema either way.
    """

    table: str
    conn_id: str = "sqlite_default"
    state_table_prefix: str = DEFAULT_PREFIX
    evolve_columns: bool = True


@dataclass(frozen=True)
class DeltaSink:
    """
    Rows into a Delta table; each batch one Delta commit holding its rows and the partition's checkpoint.

    :param table: a local path or an ``abfss://`` / ``az://`` URI; created by the first batch when missing. (templated)
    :param wasb_conn_id: the ``wasb`` connection whose credentials reach an Azure URI: a connection string, a
        service principal, an account key or a SAS; with none of them, delta-rs' own managed identity and
        environment chain. (templated)
    :param mode: ``"append"``, or ``"merge"`` (upsert on ``merge_keys``).
    :param merge_keys: the key columns of ``mode="merge"``. (templated)
    :param partition_by: partition columns of a table the first batch creates. (templated)
    :param dead_letter_table: the Delta table of dead letters: the event as received (``body_base64``,
        ``properties_json``), ``reason``, ``error``, ``status`` (``dead``, ``replaying``, ``replayed``), ``attempts``
        and ``replayed_at``; default ``<table>_dead_letters``. (templated)
    :param evolve_columns: when a typed event's schema has a field the table has no column for (a new version
        gained it), add the column (a commit of its own) before the batch is written; ``False``: fail instead,
        naming the field. A missing table is created from the schema either way.
    """

    table: str
    wasb_conn_id: str = WASB_DEFAULT
    mode: str = APPEND
    merge_keys: tuple[str, ...] | None = None
    partition_by: tuple[str, ...] | None = None
    dead_letter_table: str | None = None
    evolve_columns: bool = True

    def __post_init__(self) -> None:
        _one_of("DeltaSink", "mode", self.mode, (APPEND, MERGE))
        object.__setattr__(self, "merge_keys", _names(self.merge_keys))
        object.__setattr__(self, "partition_by", _names(self.partition_by))


@dataclass(frozen=True)
class BlobCheckpoints:
    """
    The consumer group's checkpoint and ownership blobs, in the SDK's layout (sensors and other SDKs read them).

    :param container: the container; created when missing. (templated)
    :param wasb_conn_id: its ``wasb`` connection. (templated)
    :param interval: seconds between two writes of a partition's checkpoint while the task runs (the last one is
        always written at the end).
    """

    container: str
    wasb_conn_id: str = WASB_DEFAULT
    interval: float = 1.0


@dataclass(frozen=True)
class Ownership:
    """
    How instances of a task share a hub: each claims partitions with ETag compare-and-set on the ownership blobs
    of :class:`BlobCheckpoints` (which it needs).

    :param instances: how many instances share the hub (map the task over ``instance``). (templated)
    :param strategy: ``"balanced"`` or ``"greedy"`` claiming.
    :param expiry: seconds after which a claim that was not renewed is taken over.
    """

    instances: int | None = None
    strategy: str = "balanced"
    expiry: float = 60.0

    def __post_init__(self) -> None:
        _one_of("Ownership", "strategy", self.strategy, ("balanced", "greedy"))


@dataclass(frozen=True)
class Batching:
    """
    How a partition's events are grouped into one transaction (a SQL transaction, a Delta commit).

    :param size: events per batch at most; default: as many as have arrived, within ``byte_size``.
    :param byte_size: event bodies' bytes per batch at most; default 4 MiB on a SQL sink, 64 MiB on a Delta sink.
    :param seconds: how long a partition's events wait for more before their commit (unless ``size`` or
        ``byte_size`` is reached first, or the run's end); default 0.25 on a SQL sink, 10 on a Delta sink.
        0: commit what has arrived at once.
    :param max_wait_time: seconds one receive waits for events to arrive (the SDK's ``max_wait_time``).
    """

    size: int | None = None
    byte_size: int | None = None
    seconds: float | None = None
    max_wait_time: float = 1.0


@dataclass(frozen=True)
class IngestLimits:
    """
    When a run stops: by default at each partition's last event when the run started.

    :param max_events: stop after this many events. (templated)
    :param max_duration: stop after this many seconds. (templated)
    :param partition_ids: only these partitions. (templated)
    :param stall_timeout: seconds a pending partition may deliver nothing before the task fails (and retries).
    :param lag_interval: seconds between two reads of the partitions' last enqueued sequence numbers, which each
        batch's lag (the result's and the ``eventhubs.checkpoint.lag`` metric's) is counted from.
    """

    max_events: int | None = None
    max_duration: float | None = None
    partition_ids: tuple[str, ...] | None = None
    stall_timeout: float = 120.0
    lag_interval: float = 5.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "partition_ids", _names(self.partition_ids))


@dataclass(frozen=True)
class Sessions:
    """
    In-order processing per session: an event that arrives ahead of its predecessors waits in the ``deferred``
    table until they have been applied (a SQL sink only).

    :param key: where the session is: ``property:NAME`` or ``body:FIELD``.
    :param sequence: where the per-session sequence is.
    :param first_sequence: the sequence a session starts at.
    :param end: where a truthy "last event of the session" flag is, if any.
    :param defer_limit: seconds (of enqueued time) a deferred event may wait before it is dead-lettered.
    """

    key: str
    sequence: str = f"property:{STAMP_SEQ}"
    first_sequence: int = 0
    end: str | None = None
    defer_limit: float = 3600.0


@dataclass(frozen=True)
class ProducerState:
    """
    Where producer states (sequence numbers and the ledger of batches) are kept, chosen explicitly.

    :param backend: ``"blob"``: a container in Azure Blob storage, fenced by blob leases (publishers of a group
        may overlap safely); ``"variable"``: Airflow Variables, one writer per producer group (runs must not
        overlap: ``max_active_runs=1`` or a pool of one slot). (templated)
    :param container: the blob backend's container. (templated)
    :param wasb_conn_id: its ``wasb`` connection. (templated)
    :param lease_seconds: the blob backend's lease duration (15 to 60).
    :param claim_timeout: seconds to wait for another publisher's lease before failing (retryably); default: a
        little longer than ``lease_seconds``, so a run cleared right after a crashed one publishes.
    :param keep_committed: prune the ledger to this many recent batches per partition (default: keep all; a
        pruned batch re-run would publish again).
    :param keep_committed_days: also prune batches committed more than this many days ago (the newest batch of a
        partition is always kept).
    """

    backend: str
    container: str | None = None
    wasb_conn_id: str = WASB_DEFAULT
    lease_seconds: int = 15
    claim_timeout: float | None = None
    keep_committed: int | None = None
    keep_committed_days: float | None = None

    def __post_init__(self) -> None:
        if "{{" in str(self.backend):
            return  # checked when the task runs, after templating
        _one_of("ProducerState", "backend", self.backend, ("blob", "variable"))
        if self.backend == "blob" and not self.container:
            raise ValueError("ProducerState(backend='blob'): give container=..., the container of the producer states")


@dataclass(frozen=True)
class Delivery:
    """
    How a partition's send is fenced and retried.

    :param hub_fencing: ``"auto"``: attach the sender links as idempotent producers where the hub and the
        installed SDK offer it, else fence by the claim's lease (the log says which held); ``"required"``: fail
        before anything is sent where they cannot; ``False``: the lease alone.
    :param lease_only_batch_bytes: where a send is fenced by the lease alone, each SDK batch holds at most this
        many bytes (1024 to 1048576; what a publisher that stalls mid-send can land twice per partition).
    :param send_attempts: in-process attempts per partition on transient send errors.
    """

    hub_fencing: HubFencing = "auto"
    lease_only_batch_bytes: int = DEFAULT_LEASE_ONLY_BATCH_BYTES
    send_attempts: int = 3

    def __post_init__(self) -> None:
        fencing_mode(self.hub_fencing)
        check_lease_only_batch_bytes(self.lease_only_batch_bytes)


@dataclass(frozen=True)
class EventSchema:
    """
    Publish typed events: each body (a row) encoded by Microsoft's encoder against a schema of the namespace's
    Schema Registry; every row is encoded before anything is sent.

    :param group: the Schema Registry group. (templated)
    :param definition: the schema: an Avro record schema or a JSON Schema, as a dict or JSON text.
    :param file: a file holding the definition instead. (templated)
    :param name: a schema registered already (its latest version is used); with a JSON Schema ``definition``, the
        name to register it under (default: its ``title``); an Avro schema is registered under its full name
        (``namespace.name``), as Microsoft's encoder does. (templated)
    :param format: ``"Avro"`` or ``"Json"`` (JSON Schema).
    :param auto_register: register the definition when the group does not hold it.
    :param compatibility: check against the latest registered version first: ``"Backward"``, ``"Forward"``,
        ``"Full"`` or ``"None"``.

    The operator refuses, when the DAG is parsed, a group without a definition, file or name, both ``definition``
    and ``file``, or ``auto_register`` without a definition. A ``group`` that renders empty publishes untyped events.
    """

    group: str
    definition: Any = None
    file: str | None = None
    name: str | None = None
    format: str = "Avro"
    auto_register: bool = False
    compatibility: str = "None"


@dataclass(frozen=True)
class SparkOutput:
    """
    The Spark job's output to publish: files at a path, or a table.

    :param path: the output's path, e.g. ``"/data/orders/{{ ds }}"``. (templated)
    :param format: ``parquet``, ``json``, ``csv``, ``orc``, or ``delta`` with ``delta-spark`` installed.
    :param table: a table name instead of ``path``. (templated)
    :param read_options: options of the Spark reader (``{"header": "true"}`` for csv).
    """

    path: str | None = None
    format: str = "parquet"
    table: str | None = None
    read_options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not (self.path or self.table):
            raise ValueError("SparkOutput(): give path=... (with format=...) or table=...: the output to publish")


@dataclass(frozen=True)
class EventMapping:
    """
    How each row becomes one event.

    :param body: the column holding the body (bytes, str, or a value sent as JSON); default: ``serializer``'s
        result, else the row as JSON.
    :param serializer: a picklable ``row_dict -> bytes | str | JSON-serialisable`` building the body.
    :param properties: columns copied into the event's application properties.
    :param partition: the column holding the row's partition id.
    :param key: the column hashed to the row's partition by the provider's documented stable hash (instead of
        ``partition``).
    :param order_by: the columns ordering each partition's events (ties broken by a hash of the event).
    """

    body: str | None = None
    serializer: Callable[[dict[str, Any]], Any] | None = None
    properties: tuple[str, ...] = ()
    partition: str | None = None
    key: str | None = None
    order_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", tuple(self.properties))
        object.__setattr__(self, "order_by", tuple(self.order_by))
