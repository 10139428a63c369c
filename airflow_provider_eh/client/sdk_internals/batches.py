"""EventDataBatch: one encode per event instead of the two ``EventDataBatch.add`` makes.

Part of the adapter :mod:`airflow_provider_eh.client.sdk_internals`: the rest of the package calls these
names from there, never from this module.
"""

from __future__ import annotations

from typing import Any

from azure.eventhub import EventData

# ---- EventDataBatch (batching.py) --------------------------------------------------------------


def pyamqp_batch(batch: Any) -> bool:
    """True when ``batch`` is a pyamqp ``EventDataBatch`` with the fields :func:`batch_append` maintains.

    The adapter's ``batch_fast_path`` asks this once the installed SDK has the feature's internals.
    """
    try:
        from azure.eventhub._transport._pyamqp_transport import PyamqpTransport  # private: the batch's transport
    except ImportError:
        return False
    return (
        getattr(batch, "_amqp_transport", None) is PyamqpTransport
        and not getattr(batch, "_partition_key", None)  # a keyed batch stamps every message: the SDK's add
        and all(hasattr(batch, name) for name in ("_message", "_internal_events", "_size", "_count", "_tracing_attributes"))
    )


def batch_append(batch: Any, encoded: bytes | bytearray) -> None:
    """Append one encoded message to ``batch`` by the SDK's size rule; ``ValueError`` when it does not fit.

    Private fields: ``EventDataBatch.add`` encodes each message twice (to measure, then to append);
    the SDK's rule is ``size + 5`` bytes of overhead under 256 bytes, else ``+ 8``. No ``EventData``
    is kept: ``_internal_events`` feeds only the buffered producer's callbacks and tracing links.
    """
    from azure.eventhub._common import _BATCH_MESSAGE_OVERHEAD_COST

    size = len(encoded)
    size_after_add = batch._size + size + _BATCH_MESSAGE_OVERHEAD_COST[0 if size < 256 else 1]
    if size_after_add > batch.max_size_in_bytes:
        raise ValueError(f"EventDataBatch has reached its size limit: {batch.max_size_in_bytes}")
    batch._message[5].append(encoded)
    batch._size = size_after_add
    batch._count += 1


def sdk_encode(event: EventData, transport: Any = None, tracing_attributes: Any = None) -> bytearray:
    """``event`` encoded once by the SDK's own path, as ``EventDataBatch.add`` appends it (trace properties included).

    Private: the SDK's outbound conversion, tracing and encoder, the steps ``add`` takes.
    """
    from azure.eventhub._pyamqp.utils import encode_payload
    from azure.eventhub._tracing import trace_message
    from azure.eventhub._transport._pyamqp_transport import PyamqpTransport
    from azure.eventhub._utils import transform_outbound_single_message

    transport = transport or PyamqpTransport
    outgoing = transform_outbound_single_message(event, EventData, transport.to_outgoing_amqp_message)
    message = trace_message(outgoing._message, amqp_transport=transport, additional_attributes=tracing_attributes)
    output = bytearray()
    encode_payload(output, message)
    return output


def batch_add_once(batch: Any, event: EventData) -> None:
    """``batch.add(event)`` with one encode instead of two.

    Only where :func:`~airflow_provider_eh.client.sdk_internals.batch_fast_path`.
    """
    batch_append(batch, sdk_encode(event, batch._amqp_transport, batch._tracing_attributes))
    batch._internal_events.append(event)
