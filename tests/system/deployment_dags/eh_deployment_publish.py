"""Two publish DAGs of the deployment test (``tests/system/test_deployment.py``), one per state backend.

A run publishes its day's orders (``rows`` events of about 3 KB, keyed by customer: several SDK
batches per partition, so that a worker can die in the middle of a publish) to ``params.hub``, each
event exactly once. The events are built inside the publish task from its data interval (no XCom).
A DAG's runs go one after another (``max_active_runs=1``, and ``airflow backfill create
--max-active-runs 1``, since a backfill does not take the DAG's): on the blob backend concurrent runs of one
producer group would take each other's partition leases and fail into retries; on the Variables
backend they must not overlap at all, and its publish task also takes the one slot of the pool the
deployment creates, which serialises every DAG of that producer group. The deployment runs schedules
(the event-driven example's runs are scheduled runs); these DAGs end before today (``end_date``), so
the scheduler starts none of their runs: their days are backfilled or triggered.
"""

from __future__ import annotations

from typing import Any

import pendulum

from airflow.sdk import Param, dag

from airflow_provider_eh.operators.publish import EventHubPublishOperator

PAD = "x" * 3000
VARIABLE_STATE_POOL = "eh_variable_state"  # tests.support.deployment.VARIABLE_STATE_POOL


def day_orders(context: Any) -> list[dict[str, Any]]:
    """The interval's orders: the same events on every run of the interval."""
    day = context["data_interval_start"].strftime("%Y%m%d")
    return [
        {
            "body": {"order_id": f"{day}-{n:05d}", "pad": PAD},
            "properties": {"order_id": f"{day}-{n:05d}"},
            "partition_key": f"customer-{n % 13}",
        }
        for n in range(int(context["params"]["rows"]))
    ]


for backend in ("blob", "variable"):

    @dag(
        dag_id=f"eh_deployment_publish_{backend}",
        schedule="@daily",
        start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
        end_date=pendulum.datetime(2026, 11, 9, tz="UTC"),
        catchup=False,
        max_active_runs=1,  # runs of one producer group one after another, as eh_daily_orders
        default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=5)},
        params={
            "hub": Param("orders", type="string", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,255}$"),
            "rows": Param(1000, type="integer", minimum=1, maximum=10_000),
        },
        tags=["event-hubs", "deployment-test"],
    )
    def publish_day() -> None:
        """Publish the day's orders exactly once."""
        EventHubPublishOperator(
            task_id="publish_orders",
            eventhub_name="{{ params.hub }}",
            events=day_orders,
            producer_group=f"eh_deployment_{backend}",
            state_backend=backend,
            state_container="eh-deployment-state" if backend == "blob" else None,
            pool=VARIABLE_STATE_POOL if backend == "variable" else "default_pool",
            claim_timeout=60,
        )

    publish_day()
