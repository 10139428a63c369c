"""The trigger serialises to exactly its constructor kwargs and comes back identical, with no side effects."""

from __future__ import annotations

import inspect

from airflow.providers.common.compat.module_loading import import_string

from airflow_provider_eh.triggers.checkpoint import EventHubCheckpointTrigger
from airflow_provider_eh.version_compat import AIRFLOW_V_3_2_PLUS

if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk.serde import deserialize, serialize
else:  # Airflow 3.1: serde is still in core
    from airflow.serialization.serde import deserialize, serialize

KWARGS = {
    "targets": {"0": 9, "3": 26},
    "consumer_groups": ["$Default", "analytics"],
    "container": "checkpoints",
    "eventhub_name": "orders",
    "event_hubs_conn_id": "eh_prod",
    "wasb_conn_id": "wasb_prod",
    "poll_interval": 15.0,
    "deadline": 1_900_000_000.5,
}


def test_serialize_returns_the_full_dotted_path_and_exactly_the_constructor_kwargs() -> None:
    classpath, kwargs = EventHubCheckpointTrigger(**KWARGS).serialize()

    assert classpath == "airflow_provider_eh.triggers.checkpoint.EventHubCheckpointTrigger"
    assert kwargs == KWARGS
    assert set(kwargs) == set(inspect.signature(EventHubCheckpointTrigger.__init__).parameters) - {"self"}


def test_round_trip_through_airflows_serde_rebuilds_an_equal_trigger() -> None:
    """What the triggerer (and ``dag.test()``) does: serde-encode the kwargs, import the path, rebuild."""
    classpath, kwargs = EventHubCheckpointTrigger(**KWARGS).serialize()

    rebuilt = import_string(classpath)(**deserialize(serialize(kwargs)))

    assert rebuilt.serialize() == (classpath, KWARGS)


def test_defaults_serialise_too_and_partition_ids_become_strings() -> None:
    trigger = EventHubCheckpointTrigger(targets={0: 5}, consumer_groups=("$Default",), container="c")

    _, kwargs = trigger.serialize()

    assert kwargs["targets"] == {"0": 5} and kwargs["consumer_groups"] == ["$Default"]
    assert kwargs["deadline"] is None and kwargs["event_hubs_conn_id"] == "azure_event_hubs_default"
    assert kwargs["wasb_conn_id"] == "wasb_default"
    assert EventHubCheckpointTrigger(**kwargs).serialize() == trigger.serialize()


def test_constructing_a_trigger_opens_no_client() -> None:
    """A trigger may be built many times (scheduler, triggerer, retries): construction must not connect."""
    trigger = EventHubCheckpointTrigger(**KWARGS)
    assert trigger._hook is None
