"""A received event as plain fields, from the SDK's ``EventData`` or straight from its AMQP message.

Every consumer of this package (ingestion, the event trigger's read-back) needs the same seven facts of
a received event: its partition, sequence number, offset, enqueued time, body bytes, application
properties as plain Python, and its content type (where a typed event carries its schema id). The SDK
hands over ``EventData``, which wraps the decoded AMQP message in an ``AmqpAnnotatedMessage`` and
answers each of those facts through a property; building it costs
about as much per event as decoding the message (``bench/ingest.py``'s docstring has the profile).

:func:`fields_of_message` reads the facts straight from the decoded message (the SDK's own
pyamqp ``Message``: annotations, application properties, properties, data sections), and
:func:`fields_of_event_data` reads them through ``EventData``. :class:`MessageFields` holds the fast
one to the other: a reader uses the fast path only while it gives exactly what ``EventData`` gives,
checked on the first messages of every link; one difference and that link goes through ``EventData``
from then on, with a warning. A body that is not AMQP data sections (a value or sequence body) always
goes through ``EventData``.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

log = logging.getLogger(__name__)

# The service's message annotations, as the SDK names them.
SEQUENCE_NUMBER = b"x-opt-sequence-number"
OFFSET = b"x-opt-offset"
ENQUEUED_TIME = b"x-opt-enqueued-time"


class ReceivedFields(NamedTuple):
    """What a consumer needs of one received event; ``properties`` keys and bytes values decoded as text."""

    sequence_number: int
    offset: str | None
    enqueued_time: datetime | None
    body: bytes
    properties: dict[str, Any]
    content_type: str | None = None


def plain(value: Any) -> Any:
    """An AMQP property value as JSON-safe Python (bytes are decoded as UTF-8, else base64)."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value  # the common case first: ``isinstance(value, Mapping)`` below is an ABC check, slow per event
    if kind is bytes:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")
    if kind is dict:
        return {str(plain(k)): plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return plain(bytes(value))
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(plain(k)): plain(v) for k, v in value.items()}
    return value


def _value(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return plain(value)


def _properties(raw: Any) -> dict[str, Any]:
    """Application properties with text keys (:func:`fields_of_messages` writes the same out, with its key cache)."""
    if not raw:
        return {}
    return {k if type(k) is str else str(plain(k)): _value(v) for k, v in raw.items()}


def _utc(enqueued: datetime | None) -> datetime | None:
    if enqueued is not None and enqueued.tzinfo is None:
        return enqueued.replace(tzinfo=UTC)
    return enqueued


# AMQP brokers write year 1 CE (this many seconds before the Unix epoch) for "not set"; the SDK reads it as datetime.min.
_CE_ZERO_SECONDS = -62_135_596_800


def _enqueued(stamp: Any) -> datetime:
    seconds = float(stamp) / 1000
    if seconds == _CE_ZERO_SECONDS:
        return datetime.min.replace(tzinfo=UTC)
    return datetime.fromtimestamp(seconds, tz=UTC)


def body_bytes(event: Any) -> bytes:
    """
    An ``EventData``'s body as bytes: its data sections joined (what every Event Hubs SDK sends); an
    AMQP value or sequence body (other AMQP clients) as canonical JSON text of its plain value.
    """
    body = event.body
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    kind = str(getattr(event, "body_type", "data")).lower()
    if kind.endswith("data"):
        return b"".join(body)
    value = list(body) if kind.endswith("sequence") else body
    return json.dumps(plain(value), sort_keys=True, separators=(",", ":"), default=str).encode("utf-8")


def fields_of_event_data(event: Any) -> ReceivedFields:
    """The fields of an SDK ``EventData``."""
    return ReceivedFields(
        int(event.sequence_number),
        None if event.offset is None else str(event.offset),
        _utc(event.enqueued_time),
        body_bytes(event),
        _properties(event.properties),
        event.content_type,
    )


def _content_type(properties: Any) -> str | None:
    """The content type of a message's AMQP properties, as ``EventData.content_type`` gives it (a symbol: bytes)."""
    value = properties.content_type if properties else None
    if type(value) is bytes:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value  # type: ignore[return-value]  # as EventData gives it
    return value


def fields_of_message(message: Any, reader: MessageFields | None = None) -> ReceivedFields | None:
    """
    The fields of a decoded AMQP message as the SDK's receiver hands it over (``None`` when its body
    is not data sections: those go through ``EventData``); ``reader`` lends its caches.
    """
    return fields_of_messages((message,), reader)[0]


def fields_of_messages(messages: Sequence[Any], reader: MessageFields | None = None) -> list[ReceivedFields | None]:
    """
    :func:`fields_of_message` of each of ``messages``, in one loop: per event, the decoding of its annotations and
    properties is written out here rather than called (a call costs about what a property's decoding does).
    """
    keys: dict[Any, str] = {} if reader is None else reader.keys
    last_stamp = None if reader is None else reader.last_stamp
    last_enqueued = None if reader is None else reader.last_enqueued
    out: list[ReceivedFields | None] = []
    append = out.append
    for message in messages:
        data = message.data
        if not data:
            append(None)
            continue
        annotations = message.message_annotations or _NONE
        offset = annotations.get(OFFSET)
        stamp = annotations.get(ENQUEUED_TIME)
        if not stamp:
            enqueued = None
        elif stamp == last_stamp:  # the events of one send share their enqueued time
            enqueued = last_enqueued
        else:
            enqueued = last_enqueued = _enqueued(stamp)
            last_stamp = stamp
        raw = message.application_properties
        properties: dict[str, Any] = {}
        if raw:
            for key, value in raw.items():
                name = keys.get(key)
                if name is None:
                    name = keys[key] = key if type(key) is str else str(plain(key))
                kind = type(value)
                if kind is bytes:
                    try:
                        properties[name] = value.decode("utf-8")
                    except UnicodeDecodeError:
                        properties[name] = plain(value)
                elif kind is str or kind is int or kind is float or kind is bool or value is None:
                    properties[name] = value
                else:
                    properties[name] = plain(value)
        amqp = message.properties
        append(ReceivedFields(
            int(annotations[SEQUENCE_NUMBER]),
            offset.decode("utf-8") if type(offset) is bytes else None,
            enqueued,
            data[0] if len(data) == 1 and type(data[0]) is bytes else b"".join(data),
            properties,
            None if amqp is None or amqp.content_type is None else _content_type(amqp),
        ))
    if reader is not None:
        reader.last_stamp, reader.last_enqueued = last_stamp, last_enqueued
    return out


_NONE: Mapping[Any, Any] = {}


def event_data_of(message: Any) -> Any:
    """The SDK's ``EventData`` of a received message (what its consumer builds for every message)."""
    from airflow_provider_eh.client.sdk_internals import event_data_of as build

    return build(message)


class MessageFields:
    """
    The fields of the messages of one link: :func:`fields_of_message` where it stands in for
    ``EventData``, which is checked by comparing both on the link's first :attr:`CHECKED` messages
    (one difference and the link goes through ``EventData`` from then on, with a warning).

    :param where: the link, for the warning.
    """

    CHECKED = 32

    def __init__(self, where: str):
        self.where = where
        self.trusted: bool | None = None  # None: still checking
        self.keys: dict[Any, str] = {}
        self.last_stamp: Any = None
        self.last_enqueued: datetime | None = None
        self._seen = 0

    def many(self, messages: Sequence[Any]) -> list[ReceivedFields]:
        """The fields of each of ``messages`` (one batch of the link), as :meth:`__call__` gives them."""
        if not self.trusted:
            return [self(m) for m in messages]
        fields = fields_of_messages(messages, self)
        for i, found in enumerate(fields):
            if found is None:  # not data sections
                fields[i] = fields_of_event_data(event_data_of(messages[i]))
        return fields  # type: ignore[return-value]  # no None is left

    def __call__(self, message: Any) -> ReceivedFields:
        if self.trusted:
            fast = fields_of_message(message, self)
            if fast is not None:
                return fast
            return fields_of_event_data(event_data_of(message))
        fast = fields_of_message(message, self) if self.trusted is None else None
        slow = fields_of_event_data(event_data_of(message))
        if fast is not None:
            if fast != slow:
                self.trusted = False
                log.warning(
                    "%s: reading events straight from their AMQP messages gave %r where the SDK's EventData "
                    "gives %r; this link reads through EventData from now on (slower, same events)",
                    self.where, fast, slow,
                )
            else:
                self._seen += 1
                if self._seen >= self.CHECKED:
                    self.trusted = True
        return slow


Converter = Callable[[str, ReceivedFields], Any]
