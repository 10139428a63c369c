"""Received messages, and partition receivers of our own that hand them over without ``EventData``.

Part of the adapter :mod:`airflow_provider_eh.client.sdk_internals`: the rest of the package calls these
names from there, never from this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from azure.eventhub import EventData

# ---- received messages (received_fields.py, partition_readers.py) ------------------------------------------------


def event_data_of(message: Any) -> EventData:
    """The SDK's ``EventData`` of a received AMQP message (private: what its consumer builds for each)."""
    return EventData._from_message(message)


def message_of(event: Any) -> Any:
    """The AMQP message a received ``EventData`` wraps (private: its delivery annotations are not public), or ``None``."""
    return getattr(event, "_message", None)


# ---- partition receivers of our own (partition_readers.py) ------------------------------------------------


def can_create_consumers(client: Any) -> bool:
    """Whether ``client`` can create partition receivers directly (:func:`create_consumer`)."""
    return hasattr(client, "_create_consumer")


def create_consumer(client: Any, consumer_group: str, partition_id: str, position: Any,
                    on_batch: Callable[[Any], None], **kwargs: Any) -> Any:
    """A partition's receiver of ``client``, unopened, driven by ``receive(batch=True, ...)``.

    Private: the call the SDK's ``EventProcessor`` makes for each partition it owns; its public
    ``receive_batch`` starts a processor per call (see :mod:`~airflow_provider_eh.client.partition_readers`).
    """
    return client._create_consumer(consumer_group, partition_id, position, on_batch, **kwargs)


def client_max_retries(client: Any) -> int:
    """The client's retry budget (private: its configuration object)."""
    return int(getattr(getattr(client, "_config", None), "max_retries", 3))


def wrap_consumer_errors(consumer: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace the receiver's error handling by ``wrap(its own)`` (private: every error of a ``receive`` goes there)."""
    consumer._handle_exception = wrap(consumer._handle_exception)


def wrap_consumer_delivery(consumer: Any, wrap: Callable[[Callable[[Any], None]], Callable[[Any], None]]) -> None:
    """Replace the receiver's delivery callback by ``wrap(its own)`` (private: set at creation only)."""
    consumer._on_event_received = wrap(consumer._on_event_received)


def buffered_count(consumer: Any) -> Callable[[], int]:
    """A function giving how many received messages ``consumer`` has not delivered yet (private: its buffer)."""
    buffer = getattr(consumer, "_message_buffer", None)
    return (lambda: len(buffer)) if buffer is not None else (lambda: 0)


class _Resume:
    """What the SDK's consumer keeps of the last event handed over: its offset, to reconnect after it."""

    __slots__ = ("_message",)  # the name the SDK's EventData gives its message

    def __init__(self, message: Any):
        self._message = message

    @property
    def offset(self) -> str | None:
        try:
            return self._message.message_annotations[b"x-opt-offset"].decode("UTF-8")
        except (KeyError, AttributeError, TypeError):
            return None


def hand_over_messages(consumer: Any, deliver: Callable[[Any], None]) -> bool:
    """
    Make ``consumer`` hand its batches to ``deliver`` as the decoded AMQP messages it received, instead of
    building an ``EventData`` of each; ``False`` (nothing changed) where the SDK is not built the way
    this relies on. Private: the consumer's ``receive`` takes each message of a batch from its buffer
    through ``_next_message_in_buffer`` and, to reconnect after a lost link, reads the offset of the
    last one from ``_last_received_event``: both are kept.
    """
    buffer = getattr(consumer, "_message_buffer", None)
    transport = getattr(getattr(consumer, "_amqp_transport", None), "KIND", None)
    if buffer is None or transport != "pyamqp" or not hasattr(consumer, "_next_message_in_buffer"):
        return False

    resume = _Resume(None)  # one per link, pointed at each message in turn: the SDK reads it only to reconnect

    def next_message() -> Any:
        message = resume._message = buffer.popleft()
        consumer._last_received_event = resume
        return message

    consumer._next_message_in_buffer = next_message
    consumer._on_event_received = deliver
    return True
