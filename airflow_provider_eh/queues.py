"""The ``eventhubs`` queue scheme of the common messaging provider (``MessageQueueTrigger``).

Registered through the provider metadata (``queues``). Either form selects
:class:`~airflow_provider_eh.triggers.event.EventHubEventTrigger`::

    MessageQueueTrigger(scheme="eventhubs", eventhub_name="orders", consumer_group="airflow", checkpoint_container="cp")
    MessageQueueTrigger(queue="eventhubs://mynamespace.servicebus.windows.net/orders",
                        consumer_group="airflow", checkpoint_container="cp")

The queue URI is the one the provider's assets use (``eventhubs://<namespace>/<hub>``); the hub comes
from its path, and the connection (``event_hubs_conn_id``) must reach its namespace. A queue's failures
are the event trigger's: the error map's errors (:mod:`airflow_provider_eh.client.failures`), naming
the connection, the address and the field to check.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from airflow_provider_eh.errors import EventTriggerConfigError
from airflow_provider_eh.lineage import EVENT_HUBS_SCHEME

try:
    from airflow.providers.common.messaging.providers.base_provider import BaseMessageQueueProvider
except ImportError:  # pragma: no cover - the common messaging provider is optional
    BaseMessageQueueProvider = object  # type: ignore[assignment,misc]

_FORM = f"{EVENT_HUBS_SCHEME}://<namespace>/<hub>"


def parse_queue(queue: str) -> tuple[str, str]:
    """``(namespace, hub)`` of an ``eventhubs://<namespace>/<hub>`` queue URI; other forms are refused
    (:class:`~airflow_provider_eh.errors.EventTriggerConfigError`, a ``ValueError``: not retried)."""
    parts = urlsplit(queue)
    hub = parts.path.strip("/")
    if parts.scheme != EVENT_HUBS_SCHEME or not parts.netloc or not hub or "/" in hub:
        raise EventTriggerConfigError(f"queue {queue!r} is not an Event Hubs queue URI: {_FORM}")
    return parts.netloc.lower(), hub


class EventHubsMessageQueueProvider(BaseMessageQueueProvider):
    """Event Hubs for ``MessageQueueTrigger``: scheme ``eventhubs``, queue URIs ``eventhubs://<namespace>/<hub>``."""

    scheme = EVENT_HUBS_SCHEME

    def queue_matches(self, queue: str) -> bool:
        return queue.startswith(f"{EVENT_HUBS_SCHEME}://")

    def trigger_class(self) -> type:
        from airflow_provider_eh.triggers.event import EventHubEventTrigger

        return EventHubEventTrigger

    def trigger_kwargs(self, queue: str, **kwargs: Any) -> dict[str, Any]:
        namespace, hub = parse_queue(queue)
        if kwargs.get("eventhub_name") not in (None, hub):
            raise EventTriggerConfigError(
                f"queue {queue!r} names hub {hub!r} but eventhub_name is {kwargs['eventhub_name']!r}; pass one"
            )
        return {"namespace": namespace} if "eventhub_name" in kwargs else {"eventhub_name": hub, "namespace": namespace}
