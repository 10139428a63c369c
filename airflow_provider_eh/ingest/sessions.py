"""In-order processing per session: where an event's session key and sequence are, and the session's rules (no
Airflow import). The batch processor (:mod:`~airflow_provider_eh.ingest.processor`) applies them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest.events import STAMP_SEQ, IngestEvent


@dataclass(frozen=True)
class FieldRef:
    """
    Where a value sits in an event: an application property or a (dotted) field of a JSON body.

    Spelled ``property:NAME`` or ``body:a.b``; a bare name is a property.
    """

    source: str
    name: str

    @classmethod
    def parse(cls, spec: str) -> FieldRef:
        source, sep, name = spec.partition(":")
        if not sep:
            return cls("property", spec)
        if source not in ("property", "body") or not name:
            raise SinkConfigError(f"field {spec!r} must be 'property:NAME' or 'body:FIELD[.FIELD]'")
        return cls(source, name)

    def get(self, event: IngestEvent) -> Any:
        if self.source == "property":
            if self.name not in event.properties:
                raise KeyError(f"property {self.name!r} is missing")
            return event.properties[self.name]
        value: Any = event.json()
        for part in self.name.split("."):
            if not isinstance(value, dict) or part not in value:
                raise KeyError(f"body field {self.name!r} is missing")
            value = value[part]
        return value

    def __str__(self) -> str:
        return f"{self.source}:{self.name}"


@dataclass(frozen=True)
class SessionConfig:
    """
    In-order processing per session.

    :param key: where the session key is (``property:NAME`` or ``body:FIELD``).
    :param sequence: where the per-session sequence is; default the ``eh.seq`` stamp.
    :param first_sequence: the sequence a new session starts at.
    :param end: where a truthy "last event of the session" flag is, if anywhere; the session is
        completed after that event, and later events of it become dead letters.
    :param defer_limit: a deferred event whose enqueued time is more than this behind the newest
        event of a batch becomes a dead letter (``session_expired``), naming the sequence it waited for.
    """

    key: FieldRef
    sequence: FieldRef = field(default_factory=lambda: FieldRef("property", STAMP_SEQ))
    first_sequence: int = 0
    end: FieldRef | None = None
    defer_limit: timedelta = timedelta(hours=1)

    @classmethod
    def of(
        cls,
        key: str,
        sequence: str = f"property:{STAMP_SEQ}",
        *,
        first_sequence: int = 0,
        end: str | None = None,
        defer_limit_seconds: float = 3600.0,
    ) -> SessionConfig:
        return cls(
            FieldRef.parse(key), FieldRef.parse(sequence), int(first_sequence),
            FieldRef.parse(end) if end else None, timedelta(seconds=float(defer_limit_seconds)),
        )


