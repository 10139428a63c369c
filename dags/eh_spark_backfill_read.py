"""A bounded backfill of a hub into the lakehouse: a submitted Spark job reads one interval's events, each once.

One run per day (``catchup=True``: unpausing or ``airflow backfill create`` fills past days):

``backfill_interval`` (``SparkSubmitOperator`` of ``apache-airflow-providers-apache-spark``) submits
``spark_apps/read_event_hubs.py`` to the cluster ``spark_default`` names. The job reads the hub with
``spark.readStream.format("eventhubs")`` from the interval's start to its end (enqueued times), with
``Trigger.AvailableNow``: micro-batches of at most ``max_events_per_trigger`` events until the interval's
last event, into a parquet folder of the interval through Spark's file sink, then it stops. The query's
checkpoint is the interval's own, so a retry after a crash goes on from the last micro-batch committed and a
re-run of a finished interval reads nothing: each event of the interval is in the folder once, whatever the
cluster did. Nothing in the job calls back to Airflow; its credentials come from the cluster's environment
(``EH_CONNECTION_STRING``, or the options' Entra identity). Events enqueued during the interval must still be
in the hub (within its retention) when the run reads them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pendulum

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, dag

import _orders as orders
from airflow_provider_eh.version_compat import AIRFLOW_V_3_2_PLUS

if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk import CronDataIntervalTimetable
else:  # Airflow 3.1: the DAG-authoring timetables are still in core
    from airflow.timetables.interval import CronDataIntervalTimetable

APP = str(Path(__file__).with_name("spark_apps") / "read_event_hubs.py")
# the provider as the job's Python sees it: a wheel or zip shipped with --py-files, or nothing when the cluster has it
PY_FILES = os.environ.get("EH_SPARK_PY_FILES") or None
SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.sql.session.timeZone": "UTC"}
BACKFILL = "{{ params.data_dir }}/lakehouse/backfill"
DAY = "{{ data_interval_start | ds }}"  # the interval's, which names its folder and its query's checkpoint


@dag(
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.parse(os.environ.get("EH_EXAMPLE_START_DATE", "2026-11-01"), tz="UTC"),
    catchup=True,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=30)},
    tags=["event-hubs", "spark", "example"],
    doc_md=__doc__,
    params={
        "hub": Param(orders.HUB, type="string", pattern=orders.HUB_NAME_PATTERN, title="Event Hub",
                     description="The hub to read."),
        "consumer_group": Param("$Default", type="string", minLength=1, title="Consumer group",
                                description="The consumer group the job reads as."),
        "max_events_per_trigger": Param(50_000, type="integer", minimum=1, title="Events per micro-batch",
                                        description="Events of all partitions in one micro-batch at most."),
        "data_dir": Param(orders.DATA_DIR, type="string", minLength=1, title="Data directory",
                          description="Base directory of the lakehouse folders (<data_dir>/lakehouse/backfill)."),
    },
)
def eh_spark_backfill_read() -> None:
    """Read the interval's events from the hub into a parquet folder of the interval, each once."""
    SparkSubmitOperator(
        task_id="backfill_interval",
        conn_id="spark_default",
        application=APP,
        py_files=PY_FILES,
        conf=SPARK_CONF,
        name=f"backfill-{DAY}",
        # one JSON argument: no secrets in it (the job reads them from its own environment)
        application_args=[json.dumps({
            "name": f"eh_spark_backfill_read-{DAY}",
            "checkpoint": f"{BACKFILL}/_checkpoints/ds={DAY}",
            "parquet": f"{BACKFILL}/ds={DAY}",
            "trigger": "availableNow",
            "options": {
                "eventHubName": "{{ params.hub }}",
                "consumerGroup": "{{ params.consumer_group }}",
                "startingPosition": '{"enqueuedTime": "{{ data_interval_start.isoformat() }}"}',
                "endingPosition": '{"enqueuedTime": "{{ data_interval_end.isoformat() }}"}',
                "maxEventsPerTrigger": "{{ params.max_events_per_trigger }}",
            },
        })],
        inlets=[orders.ORDERS_HUB],
    )


eh_spark_backfill_read()
