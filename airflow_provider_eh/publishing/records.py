"""The ledger's records: what a state document holds and what each committed batch is stored as.

Frozen dataclasses with fixed fields, the only place their JSON is written and read
(:mod:`airflow_provider_eh.publishing.document` documents the layout they make together), the names
records are stored under, and the ``[start, stop)`` ranges event-index sets are kept as.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

#: the two kinds of ledger record: by batch id (lookups) and by ordinal (history in commit order)
BATCH, HISTORY = "batch", "history"


def to_ranges(indexes: Iterable[int]) -> list[list[int]]:
    """Sorted ``[start, stop)`` ranges of a set of ints."""
    out: list[list[int]] = []
    for i in sorted(set(indexes)):
        if out and out[-1][1] == i:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return out


def from_ranges(ranges: Iterable[Iterable[int]] | None) -> list[int]:
    """The indexes that ``[start, stop)`` ranges cover, in order (None: none)."""
    return [i for start, stop in (ranges or []) for i in range(start, stop)]


def ranges_len(ranges: Iterable[Iterable[int]] | None) -> int:
    """How many indexes ``[start, stop)`` ranges cover (None: 0)."""
    return sum(stop - start for start, stop in (ranges or []))


R = TypeVar("R", bound="_Record")


class _Record:
    """JSON of a ledger record: every field by name; the optional ones (``OPTIONAL``) left out while None."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    def to_doc(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.name in self.OPTIONAL:
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_doc(cls: type[R], doc: Any) -> R:
        if not isinstance(doc, dict):
            raise TypeError(f"{cls.__name__} is a {type(doc).__name__}, not an object")
        names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
        missing = [n for n in names if n not in doc and n not in cls.OPTIONAL]
        if missing:
            raise KeyError(f"{cls.__name__}.{missing[0]}")
        return cls(**{n: doc.get(n) for n in names})


@dataclass(frozen=True)
class CommittedBatch(_Record):
    """A batch that landed whole: its events had producer sequence numbers ``first_seq..last_seq``."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("fingerprint", "owner_level", "committed_at", "origin", "fencing", "batch_id",
                                           "ordinal", "lease_only_batch_bytes", "schema")

    events: int
    first_seq: int
    last_seq: int
    service_last_sequence_number: int
    fingerprint: str | None = None
    owner_level: int | None = None
    committed_at: str | None = None
    origin: dict[str, Any] | None = None
    fencing: str | None = None  # the fence of the send that completed it: "hub" or "lease" (None: nothing sent)
    batch_id: str | None = None  # in a record of its own (None inside a version 1 document, keyed by it there)
    ordinal: int | None = None  # its place in the ledger's commit order (records only)
    lease_only_batch_bytes: int | None = None  # under "lease": the most bytes of one SDK batch (None: hub, or older)
    schema: dict[str, Any] | None = None  # a typed batch's schema {group, name, id, version, format} (None: untyped)


@dataclass(frozen=True)
class PendingIntent(_Record):
    """The batch being sent (written before the send): what this attempt sends and from which number."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("batch_first_seq", "started_at", "origin")

    batch_id: str
    first_seq: int
    indexes: list[list[int]] | None
    events: int
    fingerprint: str
    owner_level: int
    start_sequence_number: int
    landed: list[list[int]]
    batch_first_seq: int | None = None
    started_at: str | None = None
    origin: dict[str, Any] | None = None

    @property
    def attempt_indexes(self) -> list[int]:
        """The event indexes this attempt sends, in order (their sequence numbers count up from ``first_seq``)."""
        return list(range(self.events)) if self.indexes is None else from_ranges(self.indexes)

    @property
    def assigned_end(self) -> int:
        """The highest producer sequence number this attempt assigned."""
        n = self.events if self.indexes is None else ranges_len(self.indexes)
        return int(self.first_seq) + n - 1

    @property
    def first_of_batch(self) -> int:
        """The batch's first sequence number over all its attempts."""
        return int(self.first_seq if self.batch_first_seq is None else self.batch_first_seq)


@dataclass(frozen=True)
class PartialBatch(_Record):
    """A batch of another run found in doubt: the events of it that landed; its retry sends the rest."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("batch_first_seq", "origin", "started_at")

    events: int
    fingerprint: str
    landed: list[list[int]]
    batch_first_seq: int | None = None
    origin: dict[str, Any] | None = None
    started_at: str | None = None  # when the attempt that left it in doubt started (None: recorded before it was kept)


@dataclass(frozen=True)
class Ledger(_Record):
    """Where the committed-batch records stand: ordinals ``first..next-1`` are kept, ``last`` is the newest."""

    next: int = 0
    first: int = 0
    last: CommittedBatch | None = None

    @property
    def count(self) -> int:
        """Committed batches kept (pruning leaves fewer than were ever committed)."""
        return self.next - self.first

    def added(self, record: CommittedBatch) -> Ledger:
        """This ledger counting a committed batch whose records are written (its ordinal is ``next`` or above)."""
        assert record.ordinal is not None and record.ordinal >= self.next, (record.ordinal, self.next)
        return replace(self, next=record.ordinal + 1, last=record)

    def pruned(self, first: int) -> Ledger:
        """This ledger keeping ordinals from ``first`` on (the records below are deleted)."""
        return replace(self, first=first)

    def to_doc(self) -> dict[str, Any]:
        return {"next": self.next, "first": self.first, "last": None if self.last is None else self.last.to_doc()}

    @classmethod
    def from_doc(cls, doc: Any) -> Ledger:
        if not isinstance(doc, dict):
            raise TypeError(f"Ledger is a {type(doc).__name__}, not an object")
        ledger = cls(int(doc["next"]), int(doc["first"]),
                     None if doc.get("last") is None else CommittedBatch.from_doc(doc["last"]))
        if not 0 <= ledger.first <= ledger.next:
            raise ValueError(f"Ledger.first {ledger.first} is not within 0..next ({ledger.next})")
        return ledger


RECORDS = {"ledger": Ledger, "pending": PendingIntent, "partial": PartialBatch}

_PLAIN_NAME = re.compile(r"[a-z0-9_-]{1,64}")


def record_name(batch_id: str) -> str:
    """The name of a batch id's record: the id itself when it is short, lower-case and plain (derived ids
    are 64 hex digits), else ``sha256-`` and its digest (blob and Variable names are case-folded)."""
    if _PLAIN_NAME.fullmatch(batch_id):
        return batch_id
    return "sha256-" + hashlib.sha256(batch_id.encode()).hexdigest()


def history_name(ordinal: int) -> str:
    """The name of the history record of one ordinal: zero-padded, so that names sort in commit order."""
    return f"{ordinal:012d}"


@dataclass
class HistoryPage:
    """Committed batches of one ledger, newest first: ``batches``, how many are kept in all (``total``),
    and the ``before`` of the next (older) page, ``None`` when this one reaches the oldest."""

    batches: list[CommittedBatch]
    total: int
    before: int | None


def parse_time(text: Any) -> datetime | None:
    """An ISO time stored in a ledger record (``committed_at``, ``started_at``), UTC when it names no zone;
    ``None`` when absent or unreadable."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
