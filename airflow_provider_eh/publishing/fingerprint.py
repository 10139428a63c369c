"""An order-dependent hash of a batch's content, computable in one pass over an iterator.

Each event contributes its body and its user properties (not our stamps), length-prefixed so
that no two different sequences of events hash alike. A typed batch (every event encoded against one
registered schema) also hashes its content type, which carries the schema id: the same rows under
another schema version are other content. Spark executors compute it per partition
with :meth:`Fingerprint.update` while they iterate their rows, without collecting them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

_EMPTY = b"\x00\x00\x00\x00"


def _prop_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"b": value.hex()}
    return value


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
#: the canonical bytes of recent property sets whose values are all ``str`` or ``int``: a property of few
#: values (a region, an event type) costs a look-up per event instead of a JSON encoding. Other types are not
#: kept: ``True == 1`` and ``0.0 == -0.0`` as keys, but not as JSON.
_KEPT: dict[tuple[tuple[Any, Any], ...], bytes] = {}
_KEPT_MAX = 4096


def _canonical(properties: Mapping[str, Any]) -> bytes:
    return _CANONICAL.encode({str(k): _prop_value(v) for k, v in properties.items()}).encode()


def canonical_properties(properties: Mapping[str, Any] | None) -> bytes:
    """Properties as canonical bytes: sorted keys, typed bytes values; empty for none."""
    if not properties:
        return b""
    items = tuple(properties.items())
    for _, value in items:
        if type(value) is not str and type(value) is not int:
            return _canonical(properties)
    found = _KEPT.get(items)
    if found is None:
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        found = _KEPT[items] = _canonical(properties)
    return found


class Fingerprint:
    """Incremental fingerprint: ``update`` once per event, in order; ``hexdigest`` at the end.

    :param content_type: the content type every event of the batch carries (``avro/binary+<schema id>``),
        or ``None`` for untyped events (whose fingerprints it leaves as they were).
    """

    __slots__ = ("_hash", "count")

    def __init__(self, content_type: str | None = None) -> None:
        self._hash = hashlib.sha256(b"eh-fingerprint-v1")
        if content_type:
            typed = content_type.encode()
            self._hash.update(b"content-type" + len(typed).to_bytes(4, "big") + typed)
        self.count = 0

    def update(self, body: bytes, properties: Mapping[str, Any] | None = None) -> None:
        props = canonical_properties(properties) if properties else b""
        h = self._hash
        h.update(len(body).to_bytes(4, "big"))
        h.update(body)
        if props:
            h.update(len(props).to_bytes(4, "big"))
            h.update(props)
        else:
            h.update(_EMPTY)
        self.count += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def fingerprint_of(events: Iterable[tuple[bytes, Mapping[str, Any] | None]]) -> tuple[str, int]:
    """``(fingerprint, count)`` of ``(body, properties)`` pairs."""
    fp = Fingerprint()
    for body, props in events:
        fp.update(body, props)
    return fp.hexdigest(), fp.count
