"""The event rulebook: how an input becomes an event, the same on every path.

One set of rules, used by :class:`~airflow_provider_eh.operators.publish.EventHubPublishOperator`
(through :func:`normalise`) and by the Spark mapping (:mod:`airflow_provider_eh.spark.mapping`); the
stamp names it reserves are :mod:`airflow_provider_eh.stamps`, which ingestion reads too:

* **body** (:func:`encode_body`): bytes as they are, str as UTF-8, anything else as canonical JSON
  (sorted keys, no spaces, no NaN), with dates and times as ISO text, decimals as text, bytes as hex
  and Spark rows as objects (:func:`json_default`);
* **properties** (:func:`check_properties`): str names outside the reserved ``eh.`` prefix of our
  stamps, scalar values (``None`` kept, as AMQP null; nothing converted, anything else refused),
  ints inside the signed 64-bit range of an AMQP long;
* **size** (:func:`check_size`): body plus properties within one Event Hubs message, less room for
  the AMQP envelope and the stamps;
* **partition**: a ``partition_id``, or a ``partition_key`` mapped by our own documented hash.

Partition keys are mapped to partitions by our own documented hash, not the service's, because the
protocol needs to know each event's partition before sending (the ledger is per partition):
``int.from_bytes(sha256(key_bytes).digest()[:8], "big") % partition_count`` over the sorted
partition ids, where ``key_bytes`` is the UTF-8 of a ``str`` key, the bytes of a ``bytes`` key, or
the UTF-8 of the decimal form of an ``int`` key. Other key types (floats, tuples, None, objects)
have no stable bytes and are refused.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_eh.errors import EventTooLargeError, InvalidEventError
from airflow_provider_eh.stamps import RESERVED_PREFIX, STAMPS

MAX_MESSAGE_BYTES = 1024 * 1024
# Room for the AMQP envelope and our stamps, so an event that passes here fits in an empty SDK batch.
ENVELOPE_ALLOWANCE = 1024

Where = object
"""Which event an error is about: its index (``3`` reads "event 3"), or anything whose ``str`` describes it
(``"row with id=3"``, or a lazy description that is written only when an error message is)."""


def key_bytes(key: Any, index: int | None = None) -> bytes:
    """The stable bytes of a partition key; refuses types without a stable encoding."""
    if isinstance(key, bool) or not isinstance(key, (str, bytes, int)):
        where = f"event {index}: " if index is not None else ""
        raise InvalidEventError(
            f"{where}field 'partition_key' is a {type(key).__name__}; only str, bytes and int keys map to a "
            "stable partition. Convert the key to a string."
        )
    if isinstance(key, bytes):
        return key
    return (key if isinstance(key, str) else str(key)).encode()


@functools.lru_cache(maxsize=64)
def _numeric_order(partition_ids: tuple[str, ...]) -> tuple[str, ...]:
    """Partition ids in numeric order, sorted once per hub (a key's partition is asked for every event)."""
    return tuple(sorted(partition_ids, key=lambda p: (len(p), p)))


def partition_for_key(key: Any, partition_ids: Sequence[str], index: int | None = None) -> str:
    """The partition of ``key`` among ``partition_ids`` (sorted numerically), by the documented hash."""
    ordered = _numeric_order(tuple(partition_ids))
    digest = hashlib.sha256(key_bytes(key, index)).digest()
    return ordered[int.from_bytes(digest[:8], "big") % len(ordered)]


MAX_EVENT_BYTES = MAX_MESSAGE_BYTES - ENVELOPE_ALLOWANCE


def json_default(value: Any) -> Any:
    """JSON of the values a body may hold beyond JSON's own: dates and times, decimals, bytes, Spark rows."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if hasattr(value, "asDict"):
        return value.asDict(recursive=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


#: what ``json.dumps`` with these arguments builds anew on every call, built once
_CANONICAL_JSON = json.JSONEncoder(default=json_default, sort_keys=True, separators=(",", ":"), allow_nan=False)


def to_json(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, so equal values give equal bytes); TypeError/ValueError if impossible."""
    return _CANONICAL_JSON.encode(value).encode()


def encode_body(body: Any, where: Where, hint: str = "pass bytes, str or a JSON-serialisable value") -> bytes:
    """
    An event body as bytes: bytes as they are, str as UTF-8, anything else as canonical JSON.

    :param where: the event's index, or a description (``"row with id=3"``), for the error message.
    :param hint: what to do about a body that cannot be serialised.
    """
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    try:
        return to_json(body)
    except (TypeError, ValueError) as exc:
        raise InvalidEventError(f"{_where(where)}: field 'body' cannot be serialised ({exc}); {hint}") from None


def _where(where: Where) -> str:
    return f"event {where}" if isinstance(where, int) else str(where)


_PROP_TYPES = (str, int, float, bool, bytes, type(None))
PROPERTY_TYPES = "str, int, float, bool, bytes or None"


def check_property_name(name: Any, where: Where) -> None:
    """A property name must be a str outside the reserved ``eh.`` prefix of the stamps."""
    if not isinstance(name, str):
        raise InvalidEventError(f"{_where(where)}: property name {name!r} must be a str")
    if name.startswith(RESERVED_PREFIX):
        raise InvalidEventError(
            f"{_where(where)}: property {name!r} uses the reserved prefix 'eh.' of the publishing stamps "
            f"({', '.join(STAMPS)}); rename it"
        )


def check_properties(
    properties: Any, where: Where, *, label: str = "field 'properties.{name}'", fix: str = ""
) -> dict[str, Any] | None:
    """
    The user's application properties, checked; ``None`` when there are none.

    Names are str outside the ``eh.`` prefix; values are scalars (:data:`PROPERTY_TYPES`: ``None``
    is kept and goes as AMQP null), ints inside the signed 64-bit range of an AMQP long. Nothing is
    converted: a value of another type is refused, so every path sends the same bytes for the same input.

    :param label: how the error names a property (``{name}`` is its name): the Spark mapping names its column.
    :param fix: what to do about a value of another type, after the allowed types.
    """
    if properties is None:
        return None
    if not isinstance(properties, Mapping):
        raise InvalidEventError(f"{_where(where)}: field 'properties' must be a mapping, got {type(properties).__name__}")
    for name, value in properties.items():
        check_property_name(name, where)
        if not isinstance(value, _PROP_TYPES):
            raise InvalidEventError(
                f"{_where(where)}: {label.format(name=name)} is a {type(value).__name__}; use {PROPERTY_TYPES}{fix}"
            )
        if type(value) is int and not -(2**63) <= value < 2**63:
            raise InvalidEventError(
                f"{_where(where)}: {label.format(name=name)} is an int outside the signed 64-bit range of an AMQP "
                "long; send it as a str"
            )
    return dict(properties) or None


def check_size(body: bytes, properties: Mapping[str, Any] | None, where: Where, hint: str = "split it") -> None:
    """Body plus properties must fit one Event Hubs message with room for the envelope and stamps."""
    size = len(body) + (sum(len(k) + len(str(v)) for k, v in properties.items()) if properties else 0)
    if size > MAX_EVENT_BYTES:
        raise EventTooLargeError(
            f"{where}: {size} bytes of body and properties exceed the {MAX_EVENT_BYTES}-byte limit of one "
            f"Event Hubs message; {hint}"
        )


@dataclass(frozen=True)
class OutgoingEvent:
    """One event ready to stamp and send: its body bytes, user properties and index in the input."""

    index: int
    body: bytes
    properties: dict[str, Any] | None = field(default=None)


def normalise(
    raw: Any, index: int, partition_ids: Sequence[str], default_partition: str | None = None
) -> tuple[str, OutgoingEvent]:
    """
    ``(partition_id, OutgoingEvent)`` of one input event.

    An input event is a mapping with ``body`` and optionally ``properties``, ``partition_id`` or
    ``partition_key``; anything else is a bare body that goes to ``default_partition``.
    """
    if isinstance(raw, Mapping) and "body" in raw:
        body, props = raw["body"], raw.get("properties")
        partition, key = raw.get("partition_id"), raw.get("partition_key")
    else:
        body, props, partition, key = raw, None, None, None
    if partition is not None and key is not None:
        raise InvalidEventError(f"event {index}: give 'partition_id' or 'partition_key', not both")
    if key is not None:
        partition = partition_for_key(key, partition_ids, index)
    elif partition is None:
        partition = default_partition
    if partition is None:
        raise InvalidEventError(
            f"event {index}: no partition; idempotent publishing needs 'partition_id' or 'partition_key' per event "
            "(or the operator's partition_id)"
        )
    partition = str(partition)
    if partition not in partition_ids:
        raise InvalidEventError(
            f"event {index}: partition {partition!r} does not exist; the hub has partitions {', '.join(partition_ids)}"
        )
    data = encode_body(body, index)
    properties = check_properties(props, index)
    check_size(data, properties, f"event {index} (partition {partition})")
    return partition, OutgoingEvent(index, data, properties)
