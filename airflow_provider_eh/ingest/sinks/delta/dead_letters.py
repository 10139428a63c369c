"""A Delta sink's dead-letter table: where it is, its schema, and the row of a dead letter (no Airflow import).

Replaying them is :mod:`airflow_provider_eh.ingest.delta_replay`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.ingest.events import IngestEvent
from airflow_provider_eh.ingest.sinks.contract import Stream, utc_text

DEAD_LETTER_SUFFIX = "_dead_letters"
DEAD, REPLAYING, REPLAYED = "dead", "replaying", "replayed"  # a dead letter's status


def dead_letter_uri(uri: str) -> str:
    """The default dead-letter table of ``uri``: beside it, named ``<table>_dead_letters``."""
    return uri.rstrip("/") + DEAD_LETTER_SUFFIX


def dead_letter_row(stream: Stream, event: IngestEvent, reason: str, error: str) -> dict[str, Any]:
    """A row of the dead-letter table: the stream, the event as received, why and when, and where its replay is
    (``status`` ``dead``, ``replaying`` with the ``replay_version`` of a replay under way, or ``replayed``:
    :mod:`airflow_provider_eh.ingest.delta_replay`)."""
    namespace, eventhub, consumer_group = stream.key
    return {
        "namespace": namespace, "eventhub": eventhub, "consumer_group": consumer_group,
        "partition_id": event.partition_id, "sequence_number": int(event.sequence_number),
        "event_offset": event.offset, "enqueued_time": utc_text(event.enqueued_time),
        "body_base64": event.body_base64(), "properties_json": event.properties_json(),
        "reason": reason, "error": error[:4000], "failed_at": utc_text(datetime.now(UTC)),
        "status": DEAD, "attempts": 1, "replay_version": None, "replayed_at": None,
    }


def dead_letter_schema() -> Any:
    """The Arrow schema of the dead-letter table (:func:`dead_letter_row`)."""
    import pyarrow as pa

    text = pa.string()
    return pa.schema([
        ("namespace", text), ("eventhub", text), ("consumer_group", text), ("partition_id", text),
        ("sequence_number", pa.int64()), ("event_offset", text), ("enqueued_time", text), ("body_base64", text),
        ("properties_json", text), ("reason", text), ("error", text), ("failed_at", text),
        ("status", text), ("attempts", pa.int64()), ("replay_version", pa.int64()), ("replayed_at", text),
    ])
