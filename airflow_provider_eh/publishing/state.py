"""Producer state of one (namespace, hub, producer group, partition): owner level, sequence, ledger.

The state is one JSON document (same shape in every backend)::

    {"version": 1, "namespace": ..., "hub": ..., "group": ..., "partition": "0",
     "owner_level": 3, "claim_token": "...", "last_published_seq": 41,
     "committed": {batch_id: CommittedBatch},
     "pending": PendingIntent | null,
     "partial": {batch_id: PartialBatch}}

    CommittedBatch: {"events", "first_seq", "last_seq", "service_last_sequence_number", "fingerprint"?,
                     "owner_level"?, "committed_at"?, "origin"?, "fencing"?}
    PendingIntent:  {"batch_id", "first_seq", "indexes", "events", "fingerprint", "owner_level",
                     "start_sequence_number", "landed", "batch_first_seq"?, "started_at"?, "origin"?}
    PartialBatch:   {"events", "fingerprint", "landed", "batch_first_seq"?, "origin"?}
    origin:         {"dag_id", "task_id", "run_id", "map_index", "try_number"} (what published the batch;
                     any JSON object the caller passes, the Airflow operators pass these)

(``?``: absent from documents written before the field existed; such documents load unchanged.)
The three records are the dataclasses below, the only place their JSON is written and read; a
unit test checks this layout against them.

``origin`` names who sent the batch (the intent's, carried into the committed or partial record), so
tools (the Event Hubs view) link a batch to its Airflow task instance; readers ignore fields they do
not know, so older versions read newer documents too.

``indexes`` and ``landed`` are event-index sets stored as ``[[start, stop), ...]`` ranges, so a batch
of a million events costs a few bytes unless its sends were cut into pieces. ``landed`` maps
nothing to sequence numbers: every send attempt's indexes get consecutive fresh sequence numbers
starting at its ``first_seq``; ``indexes`` null means every event of the batch. ``batch_first_seq``
is the first sequence number ever assigned to the batch (its first attempt's ``first_seq``).

:class:`ProducerStateStore` is the interface both backends implement: claim (owner level + 1,
exclusive), write (compare-and-swap), release.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Generic, TypeVar

from airflow_provider_eh.errors import InvalidProducerStateError, ProducerDisconnectedError

log = logging.getLogger(__name__)

STATE_VERSION = 1


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
    return [i for start, stop in (ranges or []) for i in range(start, stop)]


def ranges_len(ranges: Iterable[Iterable[int]] | None) -> int:
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


@dataclass
class CommittedBatch(_Record):
    """A batch that landed whole: its events had producer sequence numbers ``first_seq..last_seq``."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("fingerprint", "owner_level", "committed_at", "origin", "fencing")

    events: int
    first_seq: int
    last_seq: int
    service_last_sequence_number: int
    fingerprint: str | None = None
    owner_level: int | None = None
    committed_at: str | None = None
    origin: dict[str, Any] | None = None
    fencing: str | None = None  # the fence of the send that completed it: "hub" or "lease" (None: nothing sent)


@dataclass
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


@dataclass
class PartialBatch(_Record):
    """A batch of another run found in doubt: the events of it that landed; its retry sends the rest."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("batch_first_seq", "origin")

    events: int
    fingerprint: str
    landed: list[list[int]]
    batch_first_seq: int | None = None
    origin: dict[str, Any] | None = None


RECORDS = {"committed": CommittedBatch, "pending": PendingIntent, "partial": PartialBatch}


@dataclass(frozen=True)
class StateKey:
    """Where one producer state lives."""

    namespace: str
    hub: str
    group: str
    partition: str

    @property
    def blob_name(self) -> str:
        return f"{self.namespace}/{self.hub}/{self.group}/producer-state/{self.partition}".lower()

    def __str__(self) -> str:
        return f"group {self.group!r} partition {self.partition} of {self.namespace}/{self.hub}"


@dataclass
class ProducerState:
    """The decoded state document; see the module docstring for the fields."""

    namespace: str
    hub: str
    group: str
    partition: str
    owner_level: int = 0
    claim_token: str | None = None
    last_published_seq: int = -1
    committed: dict[str, CommittedBatch] = field(default_factory=dict)
    pending: PendingIntent | None = None
    partial: dict[str, PartialBatch] = field(default_factory=dict)

    @classmethod
    def new(cls, key: StateKey) -> ProducerState:
        return cls(key.namespace.lower(), key.hub.lower(), key.group, key.partition)

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": STATE_VERSION,
                "namespace": self.namespace,
                "hub": self.hub,
                "group": self.group,
                "partition": self.partition,
                "owner_level": self.owner_level,
                "claim_token": self.claim_token,
                "last_published_seq": self.last_published_seq,
                "committed": {b: r.to_doc() for b, r in self.committed.items()},
                "pending": None if self.pending is None else self.pending.to_doc(),
                "partial": {b: r.to_doc() for b, r in self.partial.items()},
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes, key: StateKey, where: str, reset_hint: str) -> ProducerState:
        """Decode and check a stored document; anything unexpected is an InvalidProducerStateError."""

        def bad(why: str) -> InvalidProducerStateError:
            return InvalidProducerStateError(
                f"producer state {where} for {key}: {why}. The state cannot be trusted; to start over "
                f"{reset_hint} (and republish with a new producer group or generation if consumers dedupe on eh.seq)."
            )

        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError):
            raise bad("is not JSON") from None
        if not isinstance(doc, dict):
            raise bad("is not a JSON object")
        if doc.get("version") != STATE_VERSION:
            raise bad(f"has version {doc.get('version')!r}, this provider reads version {STATE_VERSION}")
        if (str(doc.get("namespace", "")).lower(), str(doc.get("hub", "")).lower()) != (
            key.namespace.lower(),
            key.hub.lower(),
        ):
            raise InvalidProducerStateError(
                f"producer state {where} for {key}: belongs to hub {doc.get('namespace')}/{doc.get('hub')}, not "
                f"{key.namespace}/{key.hub}. Nothing was sent. A producer group publishes to one hub: give this task "
                "its own producer_group (or state_container) for this hub; that state stays valid for its own hub, "
                "so do not delete it."
            )
        try:
            return cls(
                namespace=doc["namespace"],
                hub=doc["hub"],
                group=doc["group"],
                partition=str(doc["partition"]),
                owner_level=int(doc["owner_level"]),
                claim_token=doc.get("claim_token"),
                last_published_seq=int(doc["last_published_seq"]),
                committed={b: CommittedBatch.from_doc(r) for b, r in (doc.get("committed") or {}).items()},
                pending=None if doc.get("pending") is None else PendingIntent.from_doc(doc["pending"]),
                partial={b: PartialBatch.from_doc(r) for b, r in (doc.get("partial") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise bad(f"misses or mangles field {exc}") from None

    def prune(self, keep_last: int) -> int:
        """Forget all but the ``keep_last`` most recent committed batches; returns how many went."""
        if keep_last < 0 or len(self.committed) <= keep_last:
            return 0
        ordered = sorted(self.committed, key=lambda b: self.committed[b].last_seq)
        gone = ordered[: len(ordered) - keep_last]
        for batch_id in gone:
            del self.committed[batch_id]
        return len(gone)


class StateClaim:
    """
    An exclusive hold on one state: the state as last written, its version tag, a lost flag, and a deadline.

    The deadline (``held_until``, on this process's monotonic clock) is until when the hold is surely
    ours: the start of the last successful acquire or renewal, plus the hold's length, less a safety
    margin. A publisher that was paused (a frozen VM, a long GC, SIGSTOP) or cut off from its store
    past it may have been taken over without knowing: :meth:`check`, called before every SDK batch,
    stops it. What a backend needs besides (the blob backend's lease and its renewal) is in the
    backend's own subclass (:class:`~airflow_provider_eh.publishing.blob_store.BlobStateClaim`).
    """

    def __init__(self, key: StateKey, state: ProducerState, tag: Any, where: str):
        self.key = key
        self.state = state
        self.tag = tag
        self.where = where
        self.lost = threading.Event()
        self.lost_reason = ""
        self.held_until: float | None = None

    def hold(self, started: float, seconds: float, margin: float) -> None:
        """The hold was confirmed by a call started at ``started`` (monotonic) and lasts ``seconds``."""
        until = started + seconds - margin
        if self.held_until is None or until > self.held_until:
            self.held_until = until

    def lapse_if_due(self) -> bool:
        """Mark the claim lost if its deadline has passed; whether it is lost.

        Called by the sender before every SDK batch and by a backend before renewing: after a pause,
        whichever runs first records the same reason, the deadline.
        """
        if not self.lost.is_set() and self.held_until is not None and time.monotonic() >= self.held_until:
            late = time.monotonic() - self.held_until
            self.mark_lost(f"its hold was last confirmed too long ago: the deadline passed {late:.1f}s ago, a "
                           "pause or a store that did not answer; another publisher may have taken over")
        return self.lost.is_set()

    def check(self) -> None:
        """Raise ProducerDisconnectedError when the claim was lost or its deadline has passed."""
        if self.lapse_if_due():
            raise ProducerDisconnectedError(
                f"{self.key}: lost ownership of {self.where} ({self.lost_reason}); another publisher may own the "
                "partition now. Stopped before sending more; a retry after back-off recovers safely."
            )

    def mark_lost(self, reason: str) -> None:
        if not self.lost.is_set():
            self.lost_reason = reason
        self.lost.set()


C = TypeVar("C", bound=StateClaim)


class ProducerStateStore(ABC, Generic[C]):
    """Claim, compare-and-swap writes and release of producer states; two backends implement it, each with
    its claim type ``C``."""

    #: how to reset a broken state, for error messages ("delete blob X", "delete Variable Y")
    @abstractmethod
    def describe(self, key: StateKey) -> str: ...

    @abstractmethod
    def reset_hint(self, key: StateKey) -> str: ...

    @abstractmethod
    def read(self, key: StateKey) -> ProducerState | None:
        """The state, without claiming it (for ``get_partition_publishing_properties``)."""

    def decode(self, key: StateKey, text: str | bytes) -> ProducerState:
        """A stored document of ``key``, checked; its errors name where it is and how to reset it."""
        return ProducerState.from_json(text, key, self.describe(key), self.reset_hint(key))

    @abstractmethod
    def _acquire(self, key: StateKey) -> C:
        """Take exclusive ownership and return the claim with the current (or a new) state."""

    @abstractmethod
    def write(self, claim: C, state: ProducerState) -> None:
        """Replace the state if this claim still holds it (CAS); else ProducerDisconnectedError."""

    @abstractmethod
    def release(self, claim: C) -> None: ...

    def claim(self, key: StateKey, *, owner_level: int | None = None, starting_sequence_number: int | None = None) -> C:
        """
        Take (group, partition): exclusive hold, owner level raised and written.

        :param owner_level: use this owner level instead of stored + 1; a stored level above it means a
            newer publisher owns the partition (ProducerDisconnectedError).
        :param starting_sequence_number: first producer sequence number of a partition that has never
            published; ignored once it has.
        """
        claim = self._acquire(key)
        try:
            state = claim.state
            if owner_level is not None and owner_level < state.owner_level:
                raise ProducerDisconnectedError(
                    f"{key}: owner level {owner_level} asked for, but a publisher with owner level "
                    f"{state.owner_level} has claimed the partition; use a higher owner level or none."
                )
            state.owner_level = owner_level if owner_level is not None and owner_level > state.owner_level else state.owner_level + 1
            state.claim_token = uuid.uuid4().hex
            if starting_sequence_number is not None:
                if state.last_published_seq < 0 and not state.committed and state.pending is None:
                    state.last_published_seq = int(starting_sequence_number) - 1
                elif state.last_published_seq + 1 != starting_sequence_number:
                    log.info(
                        "%s: starting_sequence_number %s ignored: the partition already published up to %s",
                        key, starting_sequence_number, state.last_published_seq,
                    )
            self.write(claim, state)
        except BaseException:
            self.release(claim)
            raise
        return claim
