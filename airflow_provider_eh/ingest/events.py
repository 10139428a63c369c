"""What the consumer side hands to user code: one received event as plain, frozen data.

The SDK's ``EventData`` carries AMQP types (bytes keys, bytes values, body sections); user row
functions, the SQL tables (deferred events, dead letters) and replays all see the same
:class:`IngestEvent`, so an event replayed from a dead-letter row looks exactly like the one received.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_provider_eh.client.received_fields import ReceivedFields, fields_of_event_data
from airflow_provider_eh.client.typed_events import typed_content

# The stamps of idempotent-publishing.md, defined once below both engines.
from airflow_provider_eh.stamps import BATCH as STAMP_BATCH
from airflow_provider_eh.stamps import GROUP as STAMP_GROUP
from airflow_provider_eh.stamps import OWNER as STAMP_OWNER
from airflow_provider_eh.stamps import SEQ as STAMP_SEQ

__all__ = ["CONTENT_TYPE_KEY", "STAMP_BATCH", "STAMP_GROUP", "STAMP_OWNER", "STAMP_SEQ", "IngestEvent"]

_decoder = json.JSONDecoder()
_decode_json = _decoder.decode
_scan = _decoder.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__, not declared
_new = object.__new__
_set = object.__setattr__

#: where a stored typed event (deferred, dead-lettered) keeps its content type: with its properties, under this key
#: (an AMQP message property, not an application property; the state tables have no column of their own for it)
CONTENT_TYPE_KEY = "$content_type"


@dataclass(frozen=True)
class IngestEvent:
    """
    One event of one partition.

    :param partition_id: the partition it was read from.
    :param sequence_number: its service sequence number in that partition.
    :param offset: its service offset (text; informative).
    :param enqueued_time: when the service accepted it (UTC).
    :param body: the body bytes.
    :param properties: application properties, keys and bytes values decoded as text.
    :param content_type: its content type; a typed event's names its schema id (``avro/binary+<id>``).
    :param decoded: a typed event's decoded value, once decoded (:meth:`json` gives it): not stored,
        decoded again after a replay.
    """

    partition_id: str
    sequence_number: int
    offset: str | None
    enqueued_time: datetime | None
    body: bytes
    properties: Mapping[str, Any] = field(default_factory=dict)
    content_type: str | None = None
    decoded: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def received(cls, partition_id: str, fields: ReceivedFields) -> IngestEvent:
        """
        Build from what the client layer read of an event received from ``partition_id``: the receiving thread
        builds one per event, so its attributes are set in one step rather than through the frozen dataclass's
        ``__init__`` (a call of ``object.__setattr__`` per field, twice the cost); the same event, compared equal.
        """
        event = _new(cls)
        _set(event, "__dict__", {
            "partition_id": partition_id, "sequence_number": fields[0], "offset": fields[1],
            "enqueued_time": fields[2], "body": fields[3], "properties": fields[4], "content_type": fields[5],
            "decoded": None,
        })
        return event

    def with_decoded(self, value: Any) -> IngestEvent:
        """This event with its decoded value (as :func:`dataclasses.replace` would, set in one step as
        :meth:`received` does: a typed batch makes one per event)."""
        event = _new(type(self))
        _set(event, "__dict__", {**self.__dict__, "decoded": value})
        return event

    @classmethod
    def from_event_data(cls, partition_id: str, event: Any) -> IngestEvent:
        """Build from an SDK ``EventData`` received from ``partition_id``."""
        return cls(str(partition_id), *fields_of_event_data(event))

    def text(self) -> str:
        """The body as UTF-8 text."""
        return self.body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON (UTF-8, or the UTF-16/32 that ``json.loads`` detects); a typed event's decoded value."""
        if self.decoded is not None:
            return self.decoded
        try:
            text = self.body.decode("utf-8")
            # the decoder's scanner straight (its decode adds two whitespace matches); anything but one JSON value
            # that fills the text goes the whole way
            try:
                value, end = _scan(text, 0)
            except StopIteration:
                end = -1
            if end == len(text):
                return value
            return _decode_json(text)
        except (UnicodeDecodeError, ValueError):  # not UTF-8 (or not JSON): let json detect the encoding and say what is wrong
            return json.loads(self.body)

    @property
    def producer_group(self) -> str | None:
        """The ``eh.group`` stamp, ``None`` on an unstamped event."""
        group = self.properties.get(STAMP_GROUP)
        return None if group is None else str(group)

    @property
    def producer_sequence_number(self) -> int | None:
        """The ``eh.seq`` stamp as an integer, ``None`` when absent or not an integer."""
        try:
            return int(self.properties[STAMP_SEQ])
        except (KeyError, TypeError, ValueError):
            return None

    # -- storage in SQL (deferred events and dead letters) --------------------------------

    def body_base64(self) -> str:
        return base64.b64encode(self.body).decode("ascii")

    def properties_json(self) -> str:
        """The properties as JSON text; a typed event's content type (its schema id) with them under
        :data:`CONTENT_TYPE_KEY`, so it decodes again when released or replayed (other events' text is as it was)."""
        properties = dict(self.properties)
        if self.content_type is not None and typed_content(self.content_type) is not None:
            properties[CONTENT_TYPE_KEY] = self.content_type
        return json.dumps(properties, sort_keys=True, default=str)

    @classmethod
    def from_stored(
        cls,
        *,
        partition_id: str,
        sequence_number: int,
        offset: str | None,
        enqueued_time: str | None,
        body_base64: str,
        properties_json: str | None,
    ) -> IngestEvent:
        """Rebuild an event kept in the deferred or dead-letter table."""
        properties = json.loads(properties_json) if properties_json else {}
        content_type = properties.pop(CONTENT_TYPE_KEY, None)
        return cls(
            partition_id=str(partition_id),
            sequence_number=int(sequence_number),
            offset=offset,
            enqueued_time=datetime.fromisoformat(enqueued_time) if enqueued_time else None,
            body=base64.b64decode(body_base64 or ""),
            properties=properties,
            content_type=content_type,
        )
