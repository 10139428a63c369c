"""Filling an SDK ``EventDataBatch`` with one AMQP encode per event instead of two.

``EventDataBatch.add`` (azure-eventhub 5.x, pyamqp transport) encodes each message once to measure
it and again to append it. The encoder is pure Python and, with our four stamps, dominates the cost
of publishing. :func:`add_event` encodes once, measures the bytes it will append, and applies the
SDK's own size rule (``size + 5`` bytes of batch overhead under 256 bytes, else ``+ 8``). It uses the
batch's private fields (:mod:`~airflow_provider_eh.client.sdk_internals`), so it is only taken when
they look exactly as expected (checked once per batch, :func:`fast_path_available`); otherwise it
calls ``batch.add``. The unit tests pin that both
paths build byte-identical batches.

The sender prefers :mod:`~airflow_provider_eh.publishing.wire`, which skips ``EventData`` and the
SDK's encoder altogether (:func:`add_encoded`); this module's :func:`add_event` is its fallback when
a tracer is configured or the SDK's wire format could not be confirmed.
"""

from __future__ import annotations

from typing import Any

from azure.eventhub import EventData

from airflow_provider_eh.client.sdk_internals import batch_add_once, batch_append, batch_fast_path


def fast_path_available(batch: Any) -> bool:
    """True when ``batch`` is a pyamqp EventDataBatch with the fields :func:`add_event` maintains."""
    return batch_fast_path(batch)


def tracing_enabled() -> bool:
    """True when an azure-core tracer is configured: the SDK then adds trace properties per message."""
    try:
        from azure.core.settings import settings

        return settings.tracing_implementation() is not None
    except Exception:  # no azure-core settings: assume the conservative answer
        return True


def add_encoded(batch: Any, encoded: bytes | bytearray) -> None:
    """Append one already-encoded message (from ``StampedMessageEncoder``); ``ValueError`` when it does not fit.

    Only on a batch for which :func:`fast_path_available` is true.
    """
    batch_append(batch, encoded)


def add_event(batch: Any, event: EventData, fast: bool) -> None:
    """Add ``event`` to ``batch``; ``ValueError`` when it does not fit (as ``batch.add``)."""
    if fast:
        batch_add_once(batch, event)
    else:
        batch.add(event)
