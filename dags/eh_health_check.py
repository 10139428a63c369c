"""The orders pipeline's alert: every 10 minutes, fail (and notify) when it is stuck.

``check_pipeline`` (:class:`EventHubHealthCheckOperator`) fails when a batch of ``eh_daily_orders``'
producer group has stayed open (pending or partial) longer than ``max_batch_age_minutes``, or when the
``analytics`` consumer group is more than ``max_lag`` events behind on a partition of the hub; the
error names each batch (partition, batch id, age, the task instance to clear) and each lagging
partition. ``notify_on_call`` is the failure callback: swap it for your channel's notifier
(``SlackNotifier``, ``SmtpNotifier``, ...). It fails too before ``eh_daily_orders`` has published
(no ledger yet): unpause it once the pipeline runs. See ``docs/alerts.md``.
"""

from __future__ import annotations

import logging
from typing import Any

import pendulum

from airflow.sdk import Param, dag

import _orders as orders
from airflow_provider_eh.operators.health_check import EventHubHealthCheckOperator

log = logging.getLogger("eh_health_check")


def notify_on_call(context: Any) -> None:
    """The alert: replace with a notifier of your on-call channel (a list notifies each)."""
    log.error("ALERT %s: %s", context["ti"].dag_id, context.get("exception"))


@dag(
    schedule="*/10 * * * *",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["event-hubs", "example", "alerts"],
    doc_md=__doc__,
    params={
        "max_batch_age_minutes": Param(60, type="integer", minimum=1, title="Longest a batch may stay open (minutes)"),
        "max_lag": Param(5_000, type="integer", minimum=0, title="Most events 'analytics' may be behind on a partition"),
        "state_backend": Param("blob", type="string", enum=["blob", "variable"], title="eh_daily_orders' state backend"),
    },
)
def eh_health_check() -> None:
    """Fail, and notify, when a batch of the daily publish stays open or the analytics group lags."""
    EventHubHealthCheckOperator(
        task_id="check_pipeline",
        eventhub_name=orders.HUB,
        producer_groups=["eh_daily_orders"],  # eh_daily_orders' producer_group param
        state_backend="{{ params.state_backend }}",
        state_container=orders.STATE_CONTAINER,
        max_batch_age="{{ params.max_batch_age_minutes * 60 }}",
        consumer_groups=["analytics"],
        checkpoint_container=orders.CHECKPOINT_CONTAINER,
        max_lag="{{ params.max_lag }}",
        on_failure_callback=notify_on_call,
    )


eh_health_check()
