"""What the ingest and the dead-letter replay operators share: the SQL connection, the Delta store, the mapping of
SDK errors at a site, and the base operator with the target table, the row function and typed events' decoding."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, BaseOperator

from airflow_provider_eh.client.failures import FailureSite, provider_error
from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.extras import require_extra
from airflow_provider_eh.hooks.blob import delta_storage_options
from airflow_provider_eh.hooks.event_hubs import EventHubsHook
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from airflow_provider_eh.ingest import SqlIngestStore, Stream
from airflow_provider_eh.ingest.rows import load_row_function
from airflow_provider_eh.ingest.sinks.delta import APPEND, DeltaIngestStore, DeltaTarget
from airflow_provider_eh.ingest.sinks.sql.dialects import check_conn_type
from airflow_provider_eh.ingest.sinks.sql.tables import DEFAULT_PREFIX
from airflow_provider_eh.operators.deprecation import renamed_argument

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


def delta_store(
    endpoint: Any, consumer_group: str, table: str, wasb_conn_id: str, *, mode: str = APPEND,
    merge_keys: Sequence[str] | None = None, partition_by: Sequence[str] | None = None,
    dead_letter_table: str | None = None,
) -> DeltaIngestStore:
    """The Delta table ``table`` of the hub's stream, with the ``wasb`` connection's credentials for an Azure URI."""
    require_extra("deltalake", f"A Delta sink (table {table!r})")
    target = DeltaTarget(
        str(table), delta_storage_options(str(table), wasb_conn_id), mode=mode,
        merge_keys=list(merge_keys) if merge_keys else None, partition_by=list(partition_by) if partition_by else None,
        dead_letter_uri=dead_letter_table or None,
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


class SqlSinkOperator(BaseOperator):
    """What the ingest and replay operators share: the SQL target, the row function and the decoding of typed events."""

    sink_fields: tuple[str, ...] = (
        "table", "sql_conn_id", "columns", "event_hubs_conn_id", "eventhub_name", "consumer_group",
        "schema_registry_conn_id",
    )

    def __init__(
        self,
        *,
        table: str,
        sql_conn_id: str = "sqlite_default",
        row_function: RowFunction | str | None = None,
        columns: Sequence[str] | None = None,
        event_hubs_conn_id: str = EventHubsHook.default_conn_name,
        eventhub_name: str | None = None,
        consumer_group: str = "$Default",
        state_table_prefix: str = DEFAULT_PREFIX,
        schema_registry_conn_id: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.schema_registry_conn_id = schema_registry_conn_id
        self.table = table
        self.sql_conn_id = sql_conn_id
        self.row_function = row_function
        self.columns = columns
        self.event_hubs_conn_id = event_hubs_conn_id
        self.eventhub_name = eventhub_name
        self.consumer_group = consumer_group
        self.state_table_prefix = state_table_prefix

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
            _sql_connection(self.sql_conn_id),
            Stream(endpoint.namespace, endpoint.eventhub_name, self.consumer_group),
            prefix=self.state_table_prefix,
        )
        store.verify_table(self.table)
        return store


def batch_seconds_of(task_id: str, sink: str, batch_seconds: float | None, delta_batch_seconds: float | None) -> float | None:
    """``batch_seconds``, or on a Delta sink its deprecated spelling ``delta_batch_seconds`` (which a SQL sink never read)."""
    seconds = renamed_argument(task_id, "batch_seconds", batch_seconds, "delta_batch_seconds", delta_batch_seconds,
                               why=", which every sink reads (by default 0.25 s on a SQL sink, 10 s on a Delta sink)")
    return seconds if sink == DELTA else batch_seconds
