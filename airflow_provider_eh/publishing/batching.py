"""Filling an SDK ``EventDataBatch`` with one AMQP encode per event instead of two.

``EventDataBatch.add`` (azure-eventhub 5.x, pyamqp transport) encodes each message once to measure
it and again to append it. The encoder is pure Python and, with our four stamps, dominates the cost
of publishing. :func:`add_event` encodes once, measures the bytes it will append, and applies the
SDK's own size rule (``size + 5`` bytes of batch overhead under 256 bytes, else ``+ 8``). It uses the
batch's private fields, so it is only taken when they look exactly as expected (checked once per
batch, :func:`fast_path_available`); otherwise it calls ``batch.add``. The unit tests pin that both
paths build byte-identical batches.

The sender prefers :mod:`~airflow_provider_eh.publishing.wire`, which skips ``EventData`` and the
SDK's encoder altogether (:func:`add_encoded`); this module's :func:`add_event` is its fallback when
a tracer is configured or the SDK's wire format could not be confirmed.
"""

from __future__ import annotations

from typing import Any

try:  # the SDK internals the fast path relies on
    from azure.eventhub import EventData
    from azure.eventhub._common import _BATCH_MESSAGE_OVERHEAD_COST
    from azure.eventhub._pyamqp.utils import encode_payload
    from azure.eventhub._tracing import trace_message
    from azure.eventhub._transport._pyamqp_transport import PyamqpTransport
    from azure.eventhub._utils import transform_outbound_single_message

    _IMPORTED = True
except ImportError:  # another SDK layout: always the public path
    _IMPORTED = False


def fast_path_available(batch: Any) -> bool:
    """True when ``batch`` is a pyamqp EventDataBatch with the fields :func:`add_event` maintains."""
    return (
        _IMPORTED
        and getattr(batch, "_amqp_transport", None) is PyamqpTransport
        and not getattr(batch, "_partition_key", None)
        and all(hasattr(batch, name) for name in ("_message", "_internal_events", "_size", "_count", "_tracing_attributes"))
    )


def tracing_enabled() -> bool:
    """True when an azure-core tracer is configured: the SDK then adds trace properties per message."""
    try:
        from azure.core.settings import settings

        return settings.tracing_implementation() is not None
    except Exception:  # no azure-core settings: assume the conservative answer
        return True


def add_encoded(batch: Any, encoded: bytes | bytearray) -> None:
    """Append one already-encoded message (from ``StampedMessageEncoder``); ``ValueError`` when it does not fit.

    Only on a batch for which :func:`fast_path_available` is true. The batch keeps no ``EventData``
    for it: ``_internal_events`` feeds only the buffered producer's callbacks and tracing links,
    neither of which the publisher uses.
    """
    size = len(encoded)
    size_after_add = batch._size + size + _BATCH_MESSAGE_OVERHEAD_COST[0 if size < 256 else 1]
    if size_after_add > batch.max_size_in_bytes:
        raise ValueError(f"EventDataBatch has reached its size limit: {batch.max_size_in_bytes}")
    batch._message[5].append(encoded)
    batch._size = size_after_add
    batch._count += 1


def sdk_encode(event: EventData, transport: Any = None, tracing_attributes: Any = None) -> bytearray:
    """``event`` encoded once by the SDK's own path, as ``EventDataBatch.add`` appends it (trace properties included)."""
    transport = transport or PyamqpTransport
    outgoing = transform_outbound_single_message(event, EventData, transport.to_outgoing_amqp_message)
    message = trace_message(outgoing._message, amqp_transport=transport, additional_attributes=tracing_attributes)
    output = bytearray()
    encode_payload(output, message)
    return output


def add_event(batch: Any, event: EventData, fast: bool) -> None:
    """Add ``event`` to ``batch``; ``ValueError`` when it does not fit (as ``batch.add``)."""
    if not fast:
        batch.add(event)
        return
    add_encoded(batch, sdk_encode(event, batch._amqp_transport, batch._tracing_attributes))
    batch._internal_events.append(event)
