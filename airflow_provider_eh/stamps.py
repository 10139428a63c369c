"""The application properties stamped on every published event (names are a public contract).

Defined here once, below both engines: the publishers write them (:mod:`airflow_provider_eh.publishing.wire`
encodes them), the event rulebook keeps user properties out of their ``eh.`` prefix, recovery reads
them back (:func:`read_stamp`) and ingestion dedupes on them. Consumers dedupe with a
per-(``eh.group``, partition) high-water mark of ``eh.seq``. This module imports nothing of the package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP = "eh.group"
SEQ = "eh.seq"
BATCH = "eh.batch"
OWNER = "eh.owner"
RESERVED_PREFIX = "eh."
STAMPS = (GROUP, SEQ, BATCH, OWNER)

_GROUP_B, _SEQ_B, _BATCH_B = GROUP.encode(), SEQ.encode(), BATCH.encode()


def batch_stamp(batch_id: str) -> str:
    """The ``eh.batch`` value: the first 16 hex digits of the batch id."""
    return batch_id[:16]


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def read_stamp(properties: Mapping[Any, Any] | None) -> tuple[str, int, str] | None:
    """``(group, seq, batch)`` of a received event's properties (keys may be bytes), else None."""
    if not properties:
        return None
    group = properties.get(_GROUP_B, properties.get(GROUP))
    seq = properties.get(_SEQ_B, properties.get(SEQ))
    batch = properties.get(_BATCH_B, properties.get(BATCH))
    if group is None or seq is None or batch is None:
        return None
    return _text(group), int(seq), _text(batch)
