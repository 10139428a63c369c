"""What the order example DAGs share: where things live, their assets, the order generator and the tables.

Not a DAG file (``.airflowignore`` skips it); the DAG files import it from the DAGs folder. Reading
environment variables here is cheap and touches no service, so it is fine at parse time:

- ``EH_EXAMPLE_NAMESPACE``: the Event Hubs namespace the assets name (default ``127.0.0.1:5672``,
  the local stack's endpoint); the tasks themselves reach the hub through ``azure_event_hubs_default``.
- ``EH_EXAMPLE_DATA_DIR``: the default base directory of the generated orders (``$AIRFLOW_HOME/data``).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset

from airflow_provider_eh.lineage import eventhub_uri, path_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENT_HUBS_NAMESPACE = os.environ.get("EH_EXAMPLE_NAMESPACE", "127.0.0.1:5672")
HUB = "orders"
DATA_DIR = os.environ.get(
    "EH_EXAMPLE_DATA_DIR", os.path.join(os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow")), "data")
)
SQL_CONN_ID = "eh_example_db"
# The lakehouse copy of the warehouse load: a Delta table on local disk, read by its own consumer group.
LAKEHOUSE_TABLE = os.path.join(DATA_DIR, "lakehouse", "order_events")
LAKEHOUSE_GROUP = "lakehouse"
CHECKPOINT_CONTAINER = "eh-example-checkpoints"
STATE_CONTAINER = "eh-example-producer-state"

# The hub the daily pipeline publishes to; the ingestion DAG is scheduled on it.
ORDERS_HUB = Asset(name="orders_hub", uri=eventhub_uri(EVENT_HUBS_NAMESPACE, HUB), group="event-hubs")
# The daily Spark output, one ``ds=YYYY-MM-DD`` directory per interval under it.
ORDERS_FILES = Asset(name="orders_files", uri=path_uri(os.path.join(DATA_DIR, "orders")), group="files")

# Every event's body carries these columns; the ingestion tables hold them.
EVENT_COLUMNS = ("order_id", "step", "event_type", "final", "customer_id", "amount_cents", "currency", "event_time")
# The order event's Avro schema: the columns above with the types the Spark job gives them. The daily
# pipeline registers it in the namespace's Schema Registry (group ``orders``) and encodes every event
# against it; the loaders decode each event by the schema id in its content type.
ORDER_EVENT_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "OrderEvent",
    "namespace": "com.example.orders",
    "doc": "One step of an order: placed, paid, shipped or cancelled.",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "step", "type": "int", "doc": "0, 1, 2: the order's events in sequence"},
        {"name": "event_type", "type": "string"},
        {"name": "final", "type": "boolean", "doc": "the order's last event"},
        {"name": "customer_id", "type": "string"},
        {"name": "amount_cents", "type": "int"},
        {"name": "currency", "type": "string"},
        {"name": "event_time", "type": "string", "doc": "ISO 8601, UTC"},
    ],
}
# How the daily pipeline encodes its events: Avro against the schema above, or plain JSON (for a
# namespace without a Schema Registry at hand).
EVENT_FORMATS = ("avro", "json")
CURRENCIES = ("EUR", "USD", "GBP")
HUB_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,255}$"

ANALYTICS_TABLE = "analytics_order_events"
WAREHOUSE_TABLE = "order_events"
TABLES_DDL = [
    f"""CREATE TABLE IF NOT EXISTS {table} (
        order_id TEXT NOT NULL, step INTEGER NOT NULL, event_type TEXT NOT NULL, final BOOLEAN NOT NULL,
        customer_id TEXT NOT NULL, amount_cents INTEGER NOT NULL, currency TEXT NOT NULL, event_time TEXT NOT NULL
    )"""
    for table in (ANALYTICS_TABLE, WAREHOUSE_TABLE)
]


def create_tables() -> None:
    """Create the example tables in ``eh_example_db`` when missing."""
    from airflow.sdk import BaseHook

    BaseHook.get_connection(SQL_CONN_ID).get_hook().run(TABLES_DDL)


def interval_path(data_dir: str, interval_start: datetime) -> str:
    """The output directory of one interval: ``<data_dir>/orders/ds=YYYY-MM-DD``."""
    return os.path.join(data_dir, "orders", f"ds={interval_start:%Y-%m-%d}")


def generate_orders(spark: SparkSession, interval_start: datetime, interval_end: datetime, rows: int, path: str) -> int:
    """
    Write the interval's order events as parquet to ``path``; return how many events were written.

    Deterministic: every value is a hash of the interval's start and the order's number, so the same
    interval and ``rows`` give the same events on every run, on any number of Spark partitions.
    Each order is placed, then paid and shipped, or cancelled (one in ten); orders 3, 23, 43, ... of
    each interval carry the currency ``XXX`` that the warehouse loader rejects (their events become
    dead letters).
    """
    from pyspark.sql import functions as F

    seed = int(f"{interval_start:%Y%m%d}")
    start = int(interval_start.timestamp())
    span = int((interval_end - interval_start).total_seconds()) or 86400

    def pick(salt: str, n: int) -> Any:
        return F.pmod(F.xxhash64(F.lit(seed), F.col("id"), F.lit(salt)), F.lit(n))

    currency = F.element_at(F.array(*[F.lit(c) for c in CURRENCIES]), (pick("currency", len(CURRENCIES)) + 1).cast("int"))
    orders = spark.range(int(rows), numPartitions=2).select(
        F.format_string("%d-%05d", F.lit(seed), F.col("id")).alias("order_id"),
        F.format_string("c%03d", pick("customer", 40)).alias("customer_id"),
        (pick("amount", 20000) + 100).cast("int").alias("amount_cents"),
        F.when(F.col("id") % 20 == 3, F.lit("XXX")).otherwise(currency).alias("currency"),
        (F.lit(start) + pick("time", max(span - 1800, 1))).alias("placed_at"),
        F.when(pick("cancel", 10) == 0, F.array(F.lit("placed"), F.lit("cancelled")))
        .otherwise(F.array(F.lit("placed"), F.lit("paid"), F.lit("shipped")))
        .alias("steps"),
    )
    events = orders.select("*", F.posexplode("steps").alias("step", "event_type")).select(
        "order_id",
        F.col("step").cast("int").alias("step"),
        "event_type",
        (F.col("step") == F.size("steps") - 1).alias("final"),
        "customer_id",
        "amount_cents",
        "currency",
        F.date_format(F.timestamp_seconds(F.col("placed_at") + F.col("step") * 600), "yyyy-MM-dd'T'HH:mm:ss'Z'")
        .alias("event_time"),
    )
    events.write.mode("overwrite").parquet(path)
    return spark.read.parquet(path).count()


def warehouse_row(event: Any) -> dict[str, Any]:
    """The warehouse loader's row function: one row per order event; an unknown currency is refused."""
    body = event.json()
    if body.get("currency") not in CURRENCIES:
        raise ValueError(
            f"order {body.get('order_id')} step {body.get('step')}: currency {body.get('currency')!r} is not one of "
            f"{', '.join(CURRENCIES)}; fix the order upstream, or accept the currency and replay the dead letter"
        )
    return {column: body[column] for column in EVENT_COLUMNS}

