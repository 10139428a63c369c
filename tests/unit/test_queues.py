"""The ``eventhubs`` queue scheme of the common messaging provider (the ``messaging`` extra)."""

from __future__ import annotations

import pytest

from airflow_provider_eh.queues import EventHubsMessageQueueProvider, parse_queue
from airflow_provider_eh.triggers.event import EventHubEventTrigger

ARGS = {"eventhub_name": "orders", "consumer_group": "airflow", "checkpoint_container": "cp"}


def test_queue_uri_selects_the_trigger_with_the_hub_and_namespace() -> None:
    provider = EventHubsMessageQueueProvider()
    assert provider.scheme_matches("eventhubs") and not provider.scheme_matches("kafka")
    assert provider.queue_matches("eventhubs://NS.servicebus.windows.net/orders")
    assert not provider.queue_matches("kafka://broker/topic")
    assert provider.trigger_class() is EventHubEventTrigger
    assert provider.trigger_kwargs("eventhubs://NS.servicebus.windows.net/orders") == {
        "eventhub_name": "orders", "namespace": "ns.servicebus.windows.net",
    }
    with pytest.raises(ValueError, match="names hub 'orders' but eventhub_name is 'other'"):
        provider.trigger_kwargs("eventhubs://ns/orders", eventhub_name="other")
    with pytest.raises(ValueError, match="is not an Event Hubs queue URI"):
        parse_queue("eventhubs://ns/a/b")


def test_message_queue_trigger_selects_the_event_hubs_trigger() -> None:
    """Through the common messaging provider's registry (the provider metadata's ``queues``)."""
    import warnings

    from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_queue = MessageQueueTrigger(queue="eventhubs://127.0.0.1:5672/orders", consumer_group="g", checkpoint_container="c")
    path, kwargs = by_queue.serialize()
    assert path == "airflow_provider_eh.triggers.event.EventHubEventTrigger"
    assert kwargs["eventhub_name"] == "orders" and kwargs["namespace"] == "127.0.0.1:5672"
    by_scheme = MessageQueueTrigger(scheme="eventhubs", **ARGS)
    assert by_scheme.serialize()[1]["eventhub_name"] == "orders"
