"""Write each day's orders with Spark, then publish every row to the ``orders`` hub exactly once.

``write_orders`` materialises the day's output as parquet; ``SparkToEventHubOperator`` reads it on
Spark executors, which build and send the events, while the task (the Spark driver) claims, plans
and commits each Event Hubs partition. Where Spark runs comes from the ``spark_default`` connection
(``local[*]`` without one).
"""

from __future__ import annotations

from typing import Any

import pendulum

from airflow.sdk import Param, dag, task

from airflow_provider_eh.operators.spark_publish import EventMapping, ProducerState, SparkOutput, SparkToEventHubOperator


@dag(
    schedule="@daily",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["event-hubs", "spark", "example"],
    params={"data_dir": Param("/tmp/eh-example", type="string", description="where the daily parquet goes")},
)
def example_spark_publish() -> None:
    """Write the day's orders with Spark, then publish every row exactly once."""
    @task.pyspark(conn_id="spark_default", config_kwargs={"spark.sql.session.timeZone": "UTC"})
    def write_orders(spark: Any = None, sc: Any = None, data_interval_start: Any = None,
                     params: dict | None = None) -> str:
        """The day's 1,000 orders as parquet; the same day always gives the same rows."""
        day = data_interval_start.strftime("%Y%m%d")
        path = f"{params['data_dir']}/orders/ds={day}"
        spark.range(1000).selectExpr(
            f"concat('{day}-s', lpad(cast(id AS string), 5, '0')) AS order_id",
            "concat('customer-', cast(id % 50 AS string)) AS customer_id",
            "id * 10 AS amount",
        ).write.mode("overwrite").parquet(path)
        return path

    # --8<-- [start:operator]
    SparkToEventHubOperator(
        task_id="publish_orders",
        eventhub_name="orders",
        # or SparkOutput(table="db.orders"); an upstream output, or a template; json, csv, orc, delta too
        output=SparkOutput(write_orders(), format="parquet"),
        mapping=EventMapping(key="customer_id", properties=("order_id",), order_by=("order_id",)),  # or partition="pid"
        state=ProducerState("blob", container="eh-producer-state"),
        spark_conf={"spark.sql.shuffle.partitions": "4"},
    )
    # --8<-- [end:operator]


example_spark_publish()
