"""Spark where it lives: a submitted Spark job publishes its output exactly once; Airflow submits it and waits.

One run per day (``catchup=True``: unpausing or ``airflow backfill create`` fills past days):

1. ``generate_orders`` (PySpark, ``spark_default``): writes the interval's orders as parquet, the same
   events for the same interval on every run.
2. ``publish_orders`` (``SparkSubmitOperator`` of ``apache-airflow-providers-apache-spark``): submits
   ``spark_apps/publish_to_event_hubs.py`` to the cluster ``spark_default`` names. The job writes the
   interval's output with the ``eventhubs`` data source, the interval as its identity: a retry, a clear
   and re-run or a backfill of the same interval publishes nothing twice, whatever the cluster did.
   Nothing in the job calls back to Airflow; its credentials come from the cluster's environment
   (``EH_CONNECTION_STRING`` and ``EH_STATE_CONNECTION_STRING``, or the options' Entra identity).
3. ``published``: reads what the job committed for the interval from the producer-state ledger, per
   partition (the events and the last service sequence number).
4. ``load_analytics`` and ``wait_for_analytics``: the ``spark-analytics`` consumer group loads the new
   events into SQLite and the checkpoint sensor waits (deferrable) until it has checkpointed past them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pendulum

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, dag, task

import _orders as orders
from airflow_provider_eh.operators.ingest import Batching, BlobCheckpoints, EventHubIngestOperator, IngestLimits, SqlSink
from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor
from airflow_provider_eh.version_compat import AIRFLOW_V_3_2_PLUS

if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk import CronDataIntervalTimetable
else:  # Airflow 3.1: the DAG-authoring timetables are still in core
    from airflow.timetables.interval import CronDataIntervalTimetable

APP = str(Path(__file__).with_name("spark_apps") / "publish_to_event_hubs.py")
# the provider as the job's Python sees it: a wheel or zip shipped with --py-files, or nothing when the cluster has it
PY_FILES = os.environ.get("EH_SPARK_PY_FILES") or None
SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.sql.session.timeZone": "UTC"}
INTERVAL = "{{ data_interval_start.isoformat() }}/{{ data_interval_end.isoformat() }}"


@dag(
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.parse(os.environ.get("EH_EXAMPLE_START_DATE", "2026-11-01"), tz="UTC"),
    catchup=True,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=30)},
    tags=["event-hubs", "spark", "example"],
    doc_md=__doc__,
    params={
        "rows": Param(200, type="integer", minimum=1, maximum=100_000, title="Orders",
                      description="Orders to generate for the interval (1 to 100000); each order is 2 or 3 events."),
        "hub": Param(orders.HUB, type="string", pattern=orders.HUB_NAME_PATTERN, title="Event Hub",
                     description="The hub to publish to."),
        "producer_group": Param("eh_spark_submit_publish", type="string", minLength=1, maxLength=120,
                                title="Producer group",
                                description="One producer group never publishes an interval twice."),
        "generation": Param(0, type="integer", minimum=0, title="Generation",
                            description="Bump it to republish an interval on purpose."),
        "data_dir": Param(orders.DATA_DIR, type="string", minLength=1, title="Data directory",
                          description="Base directory of the generated parquet (<data_dir>/orders/ds=<date>)."),
    },
)
def eh_spark_submit_publish() -> None:
    """Generate a day of orders, have a submitted Spark job publish them exactly once, load and wait."""

    @task.pyspark(conn_id="spark_default", config_kwargs=SPARK_CONF)
    def generate_orders(spark: Any = None, sc: Any = None, params: dict | None = None,
                        data_interval_start: Any = None, data_interval_end: Any = None) -> str:
        """Write the interval's orders as parquet; return the path."""
        path = orders.interval_path(params["data_dir"], data_interval_start)
        orders.generate_orders(spark, data_interval_start, data_interval_end, params["rows"], path)
        return path

    path = generate_orders()

    publish = SparkSubmitOperator(
        task_id="publish_orders",
        conn_id="spark_default",
        application=APP,
        py_files=PY_FILES,
        conf=SPARK_CONF,
        name="publish-orders-{{ ds }}",
        # one JSON argument: no secrets in it (the job reads them from its own environment)
        application_args=[json.dumps({
            "input": str(path),
            "options": {
                "eventHubName": "{{ params.hub }}",
                "stateContainer": orders.STATE_CONTAINER,
                "producerGroup": "{{ params.producer_group }}",
                "batchId": INTERVAL,
                "generation": "{{ params.generation }}",
                "keyColumn": "customer_id",
                "orderBy": "order_id,step",
                "propertyColumns": "order_id,step,event_type,final",
                "claimTimeout": "60",
            },
        })],
        inlets=[orders.ORDERS_FILES],
        outlets=[orders.ORDERS_HUB],
    )

    @task
    def published(params: dict | None = None, data_interval_start: Any = None,
                  data_interval_end: Any = None) -> dict[str, dict[str, Any]]:
        """Per partition, what the job committed for this interval: the checkpoint sensor's targets."""
        from airflow_provider_eh.hooks.producer_state import published_batch

        interval = f"{data_interval_start.isoformat()}/{data_interval_end.isoformat()}"
        results = published_batch(params["producer_group"], interval, generation=params["generation"],
                                  eventhub_name=params["hub"], state_container=orders.STATE_CONTAINER)
        print(f"interval {interval}: {sum(r['events'] for r in results.values())} events committed, per partition "
              f"{ {p: r['service_last_sequence_number'] for p, r in sorted(results.items())} }")
        return results

    targets = published()

    load = EventHubIngestOperator(
        task_id="load_analytics",
        sink=SqlSink(orders.ANALYTICS_TABLE, conn_id=orders.SQL_CONN_ID),
        columns=list(orders.EVENT_COLUMNS),
        eventhub_name="{{ params.hub }}",
        consumer_group="spark-analytics",
        checkpoints=BlobCheckpoints(orders.CHECKPOINT_CONTAINER),
        batching=Batching(max_wait_time=0.5),
        limits=IngestLimits(max_duration=600),
        inlets=[orders.ORDERS_HUB],
    )

    wait = EventHubCheckpointSensor(
        task_id="wait_for_analytics",
        checkpoint_container=orders.CHECKPOINT_CONTAINER,
        consumer_groups="spark-analytics",
        targets=targets,
        eventhub_name="{{ params.hub }}",
        deferrable=True,
        poke_interval=5,
        timeout=900,
    )

    tables = task(orders.create_tables)()
    path >> publish >> targets >> load >> wait
    tables >> load


eh_spark_submit_publish()
