"""Daily orders: generate a day's orders with Spark, publish them exactly once, wait for the analytics consumer.

One run per day (``catchup=True``, so unpausing or ``airflow backfill create`` fills past days, from
``EH_EXAMPLE_START_DATE``, default 2026-11-01: a deployment that only backfills sets it ahead):

1. ``generate_orders`` (PySpark, ``spark_default``): writes the interval's order events as parquet to
   ``<data_dir>/orders/ds=<interval start>``; the same interval always gives the same events.
2. ``publish_orders`` (:class:`SparkToEventHubOperator`): publishes them to the hub, keyed by
   customer, each event exactly once: a retry, a re-run or a backfill of the same interval adds nothing.
   Each event is Avro, encoded by Microsoft's encoder against the order event's schema
   (``_orders.ORDER_EVENT_SCHEMA``), which the task registers in the namespace's Schema Registry
   (group ``orders``) when the group does not hold it yet, after checking that it is backward
   compatible with the latest registered version; its id is in every event's content type.
3. ``load_analytics`` (:class:`EventHubIngestOperator`): the analytics consumer group decodes each
   event by that schema id and loads what is new into SQLite (``eh_example_db``), a column per field,
   and checkpoints in blob storage as every Event Hubs SDK does.
4. ``wait_for_analytics`` (:class:`EventHubCheckpointSensor`, deferrable): waits in the triggerer
   until the consumer group has checkpointed past everything this run published.
5. ``summarize``: logs and returns the run's counts.

Trigger it from the UI to change the params below; a different ``rows`` or ``event_format`` for an
interval already published is refused as changed content unless ``generation`` is bumped (a
deliberate republish). ``event_format="json"`` publishes plain JSON events, for a namespace whose
connection names no Schema Registry.
"""

from __future__ import annotations

import os
from typing import Any

import pendulum

from airflow.sdk import Param, dag, task

import _orders as orders
from airflow_provider_eh.operators.ingest import Batching, BlobCheckpoints, EventHubIngestOperator, IngestLimits, SqlSink
from airflow_provider_eh.operators.spark_publish import (
    EventMapping,
    EventSchema,
    ProducerState,
    SparkOutput,
    SparkToEventHubOperator,
)
from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor
from airflow_provider_eh.version_compat import AIRFLOW_V_3_2_PLUS

if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk import CronDataIntervalTimetable
else:  # Airflow 3.1: the DAG-authoring timetables are still in core
    from airflow.timetables.interval import CronDataIntervalTimetable


@dag(
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.parse(os.environ.get("EH_EXAMPLE_START_DATE", "2026-11-01"), tz="UTC"),
    catchup=True,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=30)},
    tags=["event-hubs", "spark", "example"],
    doc_md=__doc__,
    params={
        "rows": Param(
            200, type="integer", minimum=1, maximum=100_000, title="Orders",
            description="Orders to generate for the interval (1 to 100000); each order is 2 or 3 events.",
        ),
        "hub": Param(
            orders.HUB, type="string", pattern=orders.HUB_NAME_PATTERN, title="Event Hub",
            description="The hub to publish to: letters, digits, '.', '_' or '-', starting with a letter or digit.",
        ),
        "producer_group": Param(
            "eh_daily_orders", type="string", minLength=1, maxLength=120, title="Producer group",
            description="Publishers of one producer group never publish an interval twice; another group publishes it again.",
        ),
        "generation": Param(
            0, type="integer", minimum=0, title="Generation",
            description="0 or more. Bump it to republish an interval on purpose (after fixing its data, say).",
        ),
        "state_backend": Param(
            "blob", type="string", enum=["blob", "variable"], title="State backend",
            description=(
                "Where publishing state lives: 'blob' (blob leases, safe for concurrent runs) or "
                "'variable' (Airflow Variables, one run at a time)."
            ),
        ),
        "event_format": Param(
            "avro", type="string", enum=list(orders.EVENT_FORMATS), title="Event format",
            description=(
                "'avro': each event encoded against the order event's schema, registered in the Schema "
                "Registry group 'orders'; 'json': plain JSON events, for a namespace without a registry."
            ),
        ),
        "data_dir": Param(
            orders.DATA_DIR, type="string", minLength=1, title="Data directory",
            description="Base directory of the generated parquet; each interval writes <data_dir>/orders/ds=<date>.",
        ),
    },
)
def eh_daily_orders() -> None:
    """One day of orders: generate them with Spark, publish them exactly once, load them, wait for the analytics group."""
    @task.pyspark(
        conn_id="spark_default",
        config_kwargs={"spark.sql.session.timeZone": "UTC", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
        outlets=[orders.ORDERS_FILES],
    )
    def generate_orders(spark: Any = None, sc: Any = None, params: dict | None = None,
                        data_interval_start: Any = None, data_interval_end: Any = None) -> dict[str, Any]:
        """Write the interval's orders as parquet; return the path and the event count."""
        path = orders.interval_path(params["data_dir"], data_interval_start)
        count = orders.generate_orders(spark, data_interval_start, data_interval_end, params["rows"], path)
        print(f"interval {data_interval_start.isoformat()}: {count} order events ({params['rows']} orders) in {path}")
        return {"path": path, "events": count}

    generated = generate_orders()

    publish = SparkToEventHubOperator(
        task_id="publish_orders",
        output=SparkOutput(generated["path"], format="parquet"),
        mapping=EventMapping(key="customer_id", properties=("order_id", "step", "event_type", "final"),
                             order_by=("order_id", "step")),
        eventhub_name="{{ params.hub }}",
        spark_conf={"spark.sql.session.timeZone": "UTC", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
        # Avro against the order event's schema; an empty group (event_format "json") publishes plain JSON
        schema=EventSchema("{{ 'orders' if params.event_format == 'avro' else '' }}", definition=orders.ORDER_EVENT_SCHEMA,
                           auto_register=True, compatibility="Backward"),
        producer_group="{{ params.producer_group }}",
        generation="{{ params.generation }}",
        state=ProducerState("{{ params.state_backend }}", container=orders.STATE_CONTAINER, claim_timeout=60),
        inlets=[orders.ORDERS_FILES],
        outlets=[orders.ORDERS_HUB],
    )

    load = EventHubIngestOperator(
        task_id="load_analytics",
        sink=SqlSink(orders.ANALYTICS_TABLE, conn_id=orders.SQL_CONN_ID),
        columns=list(orders.EVENT_COLUMNS),
        eventhub_name="{{ params.hub }}",
        consumer_group="analytics",
        checkpoints=BlobCheckpoints(orders.CHECKPOINT_CONTAINER),
        batching=Batching(max_wait_time=0.5),
        limits=IngestLimits(max_duration=600),
        inlets=[orders.ORDERS_HUB],
    )

    wait = EventHubCheckpointSensor(
        task_id="wait_for_analytics",
        checkpoint_container=orders.CHECKPOINT_CONTAINER,
        consumer_groups="analytics",
        targets=publish.output,
        eventhub_name="{{ params.hub }}",
        deferrable=True,
        poke_interval=5,
        timeout=900,
    )

    @task
    def summarize(generated: dict[str, Any], published: dict[str, dict[str, int]], loaded: dict[str, Any],
                  checkpoints: dict[str, dict[str, int]], data_interval_start: Any = None,
                  params: dict | None = None) -> dict[str, Any]:
        """Log and return the run's counts: generated, in the hub for this interval, loaded, checkpointed; and the schema."""
        schema = next((p["schema"] for p in published.values() if p.get("schema")), None)
        summary = {
            "interval_start": data_interval_start.isoformat(),
            "hub": params["hub"],
            "generated_events": generated["events"],
            "published_events": sum(p["events"] for p in published.values()),
            "per_partition": {pid: p["events"] for pid, p in sorted(published.items())},
            "loaded_by_analytics": loaded["events"],
            "analytics_checkpoints": checkpoints.get("analytics", {}),
            "schema": schema,
            "encoding": "JSON" if schema is None else (
                f"{schema['format']}, schema {schema['name']} version {schema['version']} (id {schema['id']}) "
                f"of group {schema['group']}"
            ),
        }
        print(
            "interval {interval_start} hub {hub}: {published_events} events of this interval in the hub "
            "(per partition {per_partition}); analytics loaded {loaded_by_analytics} new events, "
            "checkpoints {analytics_checkpoints}; events encoded as {encoding}".format(**summary)
        )
        return summary

    tables = task(orders.create_tables)()
    tables >> load
    publish >> load >> wait
    summarize(generated, publish.output, load.output, wait.output)


eh_daily_orders()
