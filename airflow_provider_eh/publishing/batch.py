"""What one publish is made of: the derived batch id, the stable key hash, and normalised events.

Batch ids are derived, never random: a retry, a clear-and-rerun and a backfill of the same interval
derive the same id, which is what lets the ledger turn them into no-ops. ``generation`` is the one
knob that deliberately makes a new id.

Partition keys are mapped to partitions by our own documented hash, not the service's, because the
protocol needs to know each event's partition before sending (the ledger is per partition):
``int.from_bytes(sha256(key_bytes).digest()[:8], "big") % partition_count`` over the sorted
partition ids, where ``key_bytes`` is the UTF-8 of a ``str`` key, the bytes of a ``bytes`` key, or
the UTF-8 of the decimal form of an ``int`` key. Other key types (floats, tuples, None, objects)
have no stable bytes and are refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from airflow_provider_eh.errors import EventTooLargeError, InvalidEventError
from airflow_provider_eh.publishing.stamps import RESERVED_PREFIX

MAX_MESSAGE_BYTES = 1024 * 1024
# Room for the AMQP envelope and our stamps, so an event that passes here fits in an empty SDK batch.
ENVELOPE_ALLOWANCE = 1024


def _iso(value: datetime | str | None) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def derive_batch_id(
    group: str,
    dag_id: str,
    task_id: str,
    *,
    interval_start: datetime | str | None = None,
    interval_end: datetime | str | None = None,
    logical_date: datetime | str | None = None,
    run_id: str | None = None,
    map_index: int = -1,
    generation: int = 0,
) -> str:
    """
    The 64-hex batch id of one unit of work.

    :param group: the producer group.
    :param dag_id: the DAG.
    :param task_id: the task.
    :param interval_start: start of the data interval (preferred over ``logical_date``).
    :param interval_end: end of the data interval.
    :param logical_date: used when the run has no data interval.
    :param run_id: used when the run has neither (Airflow 3 manual runs without a logical date): a
        retry and a clear-and-rerun keep their run id, so they still derive the same batch id.
    :param map_index: the mapped task's index, ``-1`` when not mapped.
    :param generation: bump to republish the same interval on purpose.
    """
    if interval_start is not None or interval_end is not None:
        when = ["interval", _iso(interval_start), _iso(interval_end)]
    elif logical_date is not None:
        when = ["logical_date", _iso(logical_date)]
    elif run_id is not None:
        when = ["run_id", run_id]
    else:
        raise ValueError(
            f"batch of {dag_id}.{task_id}: needs a data interval, a logical date or a run id to derive a stable id"
        )
    material = json.dumps(["eh-batch-v1", group, dag_id, task_id, when, int(map_index), int(generation)])
    return hashlib.sha256(material.encode()).hexdigest()


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


def partition_for_key(key: Any, partition_ids: Sequence[str], index: int | None = None) -> str:
    """The partition of ``key`` among ``partition_ids`` (sorted numerically), by the documented hash."""
    ordered = sorted(partition_ids, key=lambda p: (len(p), p))
    digest = hashlib.sha256(key_bytes(key, index)).digest()
    return ordered[int.from_bytes(digest[:8], "big") % len(ordered)]


def encode_body(body: Any, index: int) -> bytes:
    """bytes as they are, str as UTF-8, anything else as canonical JSON."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    try:
        return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidEventError(
            f"event {index}: field 'body' cannot be serialised ({exc}); pass bytes, str or a JSON-serialisable value"
        ) from None


_PROP_TYPES = (str, int, float, bool, bytes, type(None))


def check_properties(properties: Any, index: int) -> dict[str, Any] | None:
    if properties is None:
        return None
    if not isinstance(properties, Mapping):
        raise InvalidEventError(f"event {index}: field 'properties' must be a mapping, got {type(properties).__name__}")
    for name, value in properties.items():
        if not isinstance(name, str):
            raise InvalidEventError(f"event {index}: property name {name!r} must be a str")
        if name.startswith(RESERVED_PREFIX):
            raise InvalidEventError(f"event {index}: property {name!r} uses the reserved prefix 'eh.'; rename it")
        if not isinstance(value, _PROP_TYPES):
            raise InvalidEventError(
                f"event {index}: field 'properties.{name}' is a {type(value).__name__}; "
                "use str, int, float, bool, bytes or None"
            )
        if type(value) is int and not -(2**63) <= value < 2**63:
            raise InvalidEventError(
                f"event {index}: field 'properties.{name}' is an int outside the signed 64-bit range of an AMQP "
                "long; send it as a str"
            )
    return dict(properties) or None


@dataclass(frozen=True)
class OutgoingEvent:
    """One event ready to stamp and send: its body bytes, user properties and index in the input."""

    index: int
    body: bytes
    properties: dict[str, Any] | None = field(default=None)


def normalise(raw: Any, index: int, partition_ids: Sequence[str], default_partition: str | None = None) -> tuple[str, OutgoingEvent]:
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
    size = len(data) + (sum(len(k) + len(str(v)) for k, v in properties.items()) if properties else 0)
    if size > MAX_MESSAGE_BYTES - ENVELOPE_ALLOWANCE:
        raise EventTooLargeError(
            f"event {index} (partition {partition}): {size} bytes of body and properties exceed the "
            f"{MAX_MESSAGE_BYTES - ENVELOPE_ALLOWANCE}-byte limit of one Event Hubs message; split it"
        )
    return partition, OutgoingEvent(index, data, properties)
