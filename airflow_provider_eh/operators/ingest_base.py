"""What the ingest and the dead-letter replay operators share: the SQL connection, the Delta store, the mapping of
SDK errors at a site, and the base operator with the target table, the row function and typed events' decoding."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_provider_eh.client.failures import FailureSite, provider_error
from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.extras import require_extra
from airflow_provider_eh.hooks.blob import delta_storage_options
from airflow_provider_eh.hooks.event_hubs import EventHubHook
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from airflow_provider_eh.ingest import SqlIngestStore, Stream
from airflow_provider_eh.ingest.rows import load_row_function
from airflow_provider_eh.ingest.sinks.delta import APPEND, DeltaIngestStore, DeltaTarget
from airflow_provider_eh.ingest.sinks.sql.dialects import check_conn_type
from airflow_provider_eh.ingest.sinks.sql.tables import DEFAULT_PREFIX
from airflow_provider_eh.operators.deprecated_arguments import DeprecatedSinkArguments, record_of
from airflow_provider_eh.operators.settings import DeltaSink, SqlSink

if TYPE_CHECKING:
    from airflow_provider_eh.ingest.rows import RowFunction


def _sql_connection(sql_conn_id: str) -> Any:
    """A DB-API connection from an Airflow SQL connection (its provider's ``DbApiHook``)."""
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    connection = BaseHook.get_connection(sql_conn_id)
    check_conn_type(connection.conn_type, sql_conn_id)  # before the hook opens it, before any event is read
    hook = connection.get_hook()
    if not isinstance(hook, DbApiHook):
        raise SinkConfigError(
            f"Connection {sql_conn_id!r} gives a {type(hook).__name__}, not a SQL hook; use a sqlite, postgres "
            "or mysql connection (install its Airflow provider)."
        )
    return hook.get_conn()


SQL = "sql"
DELTA = "delta"
SQL_BATCH_BYTES = 4 * 1024 * 1024
#: deprecated flat argument -> its field of SqlSink / DeltaSink
SQL_SINK_ARGUMENTS = {"table": "table", "sql_conn_id": "conn_id", "state_table_prefix": "state_table_prefix"}
DELTA_SINK_ARGUMENTS = {"table": "table", "wasb_conn_id": "wasb_conn_id", "delta_mode": "mode", "merge_keys": "merge_keys",
                        "partition_by": "partition_by", "dead_letter_table": "dead_letter_table"}


def delta_store(
    endpoint: Any, consumer_group: str, table: str, wasb_conn_id: str, *, mode: str = APPEND,
    merge_keys: Sequence[str] | None = None, partition_by: Sequence[str] | None = None,
    dead_letter_table: str | None = None, evolve_columns: bool = True,
) -> DeltaIngestStore:
    """The Delta table ``table`` of the hub's stream, with the ``wasb`` connection's credentials for an Azure URI;
    ``evolve_columns``: add a column for a field a typed event's schema gains (:class:`DeltaSink`)."""
    require_extra("deltalake", f"A Delta sink (table {table!r})")
    target = DeltaTarget(
        str(table), delta_storage_options(str(table), wasb_conn_id), mode=mode,
        merge_keys=list(merge_keys) if merge_keys else None, partition_by=list(partition_by) if partition_by else None,
        dead_letter_uri=dead_letter_table or None, evolve_columns=evolve_columns,
    )
    return DeltaIngestStore(target, Stream(endpoint.namespace, endpoint.eventhub_name, consumer_group))


@contextmanager
def sdk_failures(site_of: Callable[[BaseException], FailureSite]) -> Iterator[None]:
    """Raise the error map's error (:mod:`airflow_provider_eh.client.failures`) in place of an SDK or network
    error, at the site ``site_of`` gives for it; the package's own errors and anything else unchanged."""
    try:
        yield
    except Exception as exc:
        mapped = provider_error(exc, site_of(exc))
        if mapped is None:
            raise
        raise mapped from exc


class SqlSinkOperator(DeprecatedSinkArguments):
    """What the ingest and replay operators share: the sink, the row function and the decoding of typed events.

    The sink's record is kept as flat attributes (``table``, ``sql_conn_id``, ...): they are the task's template
    fields, rendered by Airflow and read by the Event Hubs tab from the serialized DAG.
    """

    sink_fields: tuple[str, ...] = (
        "table", "sql_conn_id", "columns", "event_hubs_conn_id", "eventhub_name", "consumer_group",
        "schema_registry_conn_id", "sink_wasb_conn_id", "merge_keys", "dead_letter_table",
    )

    def __init__(
        self,
        *,
        sink: SqlSink | DeltaSink | str | None = None,
        row_function: RowFunction | str | None = None,
        columns: Sequence[str] | None = None,
        event_hubs_conn_id: str = EventHubHook.default_conn_name,
        eventhub_name: str | None = None,
        consumer_group: str = "$Default",
        schema_registry_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        record = self._sink_record(sink)
        self.sink = DELTA if isinstance(record, DeltaSink) else SQL
        self.table = record.table
        self.sql_conn_id = record.conn_id if isinstance(record, SqlSink) else None
        self.state_table_prefix = record.state_table_prefix if isinstance(record, SqlSink) else DEFAULT_PREFIX
        self.evolve_columns = record.evolve_columns
        delta = record if isinstance(record, DeltaSink) else DeltaSink(record.table)
        self.sink_wasb_conn_id = delta.wasb_conn_id
        self.delta_mode = delta.mode
        self.merge_keys = delta.merge_keys
        self.partition_by = delta.partition_by
        self.dead_letter_table = delta.dead_letter_table
        self.schema_registry_conn_id = schema_registry_conn_id
        self.row_function = row_function
        self.columns = columns
        self.event_hubs_conn_id = event_hubs_conn_id
        self.eventhub_name = eventhub_name
        self.consumer_group = consumer_group

    def _sink_record(self, sink: SqlSink | DeltaSink | str | None) -> SqlSink | DeltaSink:
        """``sink``, or the record its deprecated flat arguments describe (``sink="delta"`` with ``table=...``)."""
        if sink is not None and not isinstance(sink, (str, SqlSink, DeltaSink)):
            raise SinkConfigError(f"Task {self.task_id!r}: sink={sink!r}: pass SqlSink(table, conn_id=...) or "
                                  "DeltaSink(path_or_uri, ...)")
        if isinstance(sink, str) and sink not in (SQL, DELTA):
            raise SinkConfigError(f"sink {sink!r} must be {SQL!r} or {DELTA!r}")
        record: SqlSink | DeltaSink | None
        if sink == DELTA or isinstance(sink, DeltaSink):
            given = sink if isinstance(sink, DeltaSink) else None
            record = record_of(self, "sink", DeltaSink, given, DELTA_SINK_ARGUMENTS, requires=("table",))
        else:
            record = record_of(self, "sink", SqlSink, sink if isinstance(sink, SqlSink) else None, SQL_SINK_ARGUMENTS,
                               requires=("table",))
        if record is None:
            raise SinkConfigError(f"Task {self.task_id!r}: pass sink=SqlSink(table, conn_id=...) or "
                                  "sink=DeltaSink(path_or_uri, ...): where the events land")
        return record

    def _decoder(self) -> TypedDecoder:
        """The decoder of typed events: the registry of ``schema_registry_conn_id`` (default: the Event Hubs
        connection's namespace, as publishing uses), looked up at the first typed event only."""
        conn_id = self.schema_registry_conn_id or self.event_hubs_conn_id
        return TypedDecoder(lambda: SchemaRegistryHook(conn_id).get_endpoint(), conn_id=conn_id)

    def _row_function(self) -> Callable[..., Any]:
        if callable(self.row_function):
            return self.row_function
        return load_row_function(self.row_function, self.columns)

    def _store(self, endpoint: Any) -> SqlIngestStore:
        store = SqlIngestStore(
            _sql_connection(str(self.sql_conn_id)),
            Stream(endpoint.namespace, endpoint.eventhub_name, self.consumer_group),
            prefix=self.state_table_prefix, evolve_columns=self.evolve_columns,
        )
        store.verify_table(self.table)
        return store
