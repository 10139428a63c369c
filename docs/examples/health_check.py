"""Alert when publishing or consuming on the ``orders`` hub is stuck: a health check every 10 minutes.

``check_orders`` fails when a batch of the producer groups has stayed open (pending or partial) longer
than ``max_batch_age_minutes``, or when the consumer group ``analytics`` is more than ``max_lag``
events behind on a partition; the error names each one and what to do. Its failure calls
``alert_on_call``: replace it with the notifier of your on-call channel. Trigger the DAG from the UI
to check other groups or bounds.
"""

from __future__ import annotations

import logging
from typing import Any

import pendulum

from airflow.sdk import Param, dag

from airflow_provider_eh.operators.health_check import EventHubHealthCheckOperator

log = logging.getLogger("eh_example_alerts")


# --8<-- [start:callback]
def alert_on_call(context: Any) -> None:
    """The alert: the check's error names every stuck batch and lagging partition.

    Replace it with a notifier, for instance ``SlackNotifier(slack_conn_id="slack_on_call",
    text="{{ exception }}")`` from apache-airflow-providers-slack, or ``SmtpNotifier`` from
    apache-airflow-providers-smtp; a list of them notifies each.
    """
    ti = context["ti"]
    log.error("ALERT %s.%s (%s): %s", ti.dag_id, ti.task_id, context.get("run_id"), context.get("exception"))
# --8<-- [end:callback]


@dag(
    schedule="*/10 * * * *",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,               # a health check is about now: no runs for the past
    max_active_runs=1,
    render_template_as_native_obj=True,  # the params below reach the operator as lists and numbers
    tags=["event-hubs", "example", "alerts"],
    params={
        "hub": Param("orders", type="string", minLength=1, title="Event Hub"),
        "producer_groups": Param(["example_publish_events.publish_orders", "example_ingest_and_wait.publish_payments"],
                                 type="array", items={"type": "string", "minLength": 1}, title="Producer groups"),
        "state_backend": Param("blob", type="string", enum=["blob", "variable"], title="State backend"),
        "state_container": Param("eh-producer-state", type="string", title="State container (blob backend)"),
        "max_batch_age_minutes": Param(30, type="integer", minimum=1, title="Longest a batch may stay open (minutes)"),
        "consumer_groups": Param(["analytics"], type="array", items={"type": "string", "minLength": 1},
                                 title="Consumer groups"),
        "checkpoint_container": Param("eh-checkpoints", type="string", minLength=3, title="Checkpoint container"),
        "max_lag": Param(10_000, type="integer", minimum=0, title="Most events a consumer group may be behind"),
    },
)
def example_health_check() -> None:
    """Fail, and alert, when a batch stays open too long or a consumer group lags too far."""
    # --8<-- [start:operator]
    EventHubHealthCheckOperator(
        task_id="check_orders",
        eventhub_name="{{ params.hub }}",
        producer_groups="{{ params.producer_groups }}",
        state_backend="{{ params.state_backend }}",  # where the publish tasks keep their ledgers
        state_container="{{ params.state_container }}",
        max_batch_age="{{ params.max_batch_age_minutes * 60 }}",  # seconds, or a timedelta
        consumer_groups="{{ params.consumer_groups }}",
        checkpoint_container="{{ params.checkpoint_container }}",
        max_lag="{{ params.max_lag }}",
        on_failure_callback=alert_on_call,
    )
    # --8<-- [end:operator]


example_health_check()
