"""Events in the SQL sink's state tables: the columns an event is kept in (dead letters, deferred events) and the
dead-letter record read back (no Airflow import)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.ingest.events import IngestEvent
from airflow_provider_eh.ingest.sinks.contract import utc_text


@dataclass(frozen=True)
class DeadLetter:
    """
    A dead-letter row.

    :param event: the event, as received.
    :param reason: ``rejected`` (the row function raised), ``row_rejected`` (the database refused its
        rows), ``session_expired``, ``session_completed``, ``bad_session`` (no session key or sequence) or
        ``undecodable`` (a typed event that does not decode: unknown schema id, corrupt content, no registry).
    :param error: the error text.
    :param failed_at: when, ISO 8601.
    :param status: ``dead`` or ``replayed``.
    :param attempts: how many times it failed.
    """

    event: IngestEvent
    reason: str
    error: str
    failed_at: str
    status: str
    attempts: int


STREAM_COLUMNS = ("namespace", "eventhub", "consumer_group")
EVENT_COLUMNS = ("partition_id", "sequence_number", "event_offset", "enqueued_time", "body_base64", "properties_json")
EVENT_SELECT = ", ".join(EVENT_COLUMNS)


def event_columns(event: IngestEvent) -> tuple[Any, ...]:
    """An event as the values of :data:`EVENT_COLUMNS`."""
    return (
        event.partition_id,
        event.sequence_number,
        event.offset,
        utc_text(event.enqueued_time),
        event.body_base64(),
        event.properties_json(),
    )


def event_from_row(row: Sequence[Any]) -> IngestEvent:
    """The event a row of :data:`EVENT_COLUMNS` holds."""
    return IngestEvent.from_stored(
        partition_id=row[0], sequence_number=row[1], offset=row[2], enqueued_time=row[3],
        body_base64=row[4], properties_json=row[5],
    )
