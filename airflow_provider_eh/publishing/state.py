"""Producer state of one (namespace, hub, producer group, partition): owner level, sequence, ledger.

The state is a small *hot document* (same shape in every backend), read and written whole on the
claim, the intent and the commit, plus one small *record* per committed batch, written once when
the batch commits and never again (until pruning deletes it)::

    {"version": 2, "namespace": ..., "hub": ..., "group": ..., "partition": "0",
     "owner_level": 3, "claim_token": "...", "last_published_seq": 41,
     "ledger": Ledger,
     "pending": PendingIntent | null,
     "partial": {batch_id: PartialBatch}}

    Ledger:         {"next", "first", "last"}
    CommittedBatch: {"events", "first_seq", "last_seq", "service_last_sequence_number", "fingerprint"?,
                     "owner_level"?, "committed_at"?, "origin"?, "fencing"?, "batch_id"?, "ordinal"?}
    PendingIntent:  {"batch_id", "first_seq", "indexes", "events", "fingerprint", "owner_level",
                     "start_sequence_number", "landed", "batch_first_seq"?, "started_at"?, "origin"?}
    PartialBatch:   {"events", "fingerprint", "landed", "batch_first_seq"?, "origin"?}
    origin:         {"dag_id", "task_id", "run_id", "map_index", "try_number"} (what published the batch;
                    any JSON object the caller passes, the Airflow operators pass these)

(``?``: absent from documents written before the field existed; such documents load unchanged.)
The records are the dataclasses of :mod:`~airflow_provider_eh.publishing.records`, the only place
their JSON is written and read; a unit test checks this layout against them.

**Committed batches are records, not part of the document.** Every commit gets the next *ordinal*
(``ledger.next``, then one more) and is stored twice, each a few hundred bytes: under its batch id
(``batch`` records: the lookup "is this batch committed?", one read) and under its ordinal
(``history`` records: the ledger in commit order, paged for the view and pruned oldest first,
without listing anything). ``ledger.first`` is the oldest ordinal kept (pruning raises it) and
``ledger.last`` the newest committed batch. So what a publish reads and writes, and the largest
object stored, are the same on day one and after a million batches. Version 1 documents kept every
committed batch inside (``"committed": {batch_id: CommittedBatch}``): they load, and the first claim
moves their batches into records (ordinals in sequence-number order) before it writes version 2
(:meth:`ProducerStateStore.claim`), so nothing committed is lost and an upgrade needs no step.

``origin`` names who sent the batch (the intent's, carried into the committed or partial record), so
tools (the Event Hubs view) link a batch to its Airflow task instance; readers ignore fields they do
not know, so older versions read newer records too.

``indexes`` and ``landed`` are event-index sets stored as ``[[start, stop), ...]`` ranges, so a batch
of a million events costs a few bytes unless its sends were cut into pieces. ``landed`` maps
nothing to sequence numbers: every send attempt's indexes get consecutive fresh sequence numbers
starting at its ``first_seq``; ``indexes`` null means every event of the batch. ``batch_first_seq``
is the first sequence number ever assigned to the batch (its first attempt's ``first_seq``).

:class:`ProducerStateStore` is the interface both backends implement: claim (owner level + 1,
exclusive), write (compare-and-swap), release, and the records (get, put, delete by name).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from airflow_provider_eh.errors import InvalidProducerStateError, ProducerDisconnectedError
from airflow_provider_eh.publishing.records import (  # noqa: F401  (defined here before; still importable from here)
    BATCH,
    HISTORY,
    RECORDS,
    CommittedBatch,
    HistoryPage,
    Ledger,
    PartialBatch,
    PendingIntent,
    from_ranges,
    history_name,
    ranges_len,
    record_name,
    to_ranges,
)

log = logging.getLogger(__name__)

STATE_VERSION = 2
#: versions this provider reads: 1 (every committed batch inside the document) is migrated on its first claim
READABLE_VERSIONS = (1, 2)
#: record calls made at once when many records are read, moved or deleted (a page, a migration, a prune)
RECORD_THREADS = 16


@dataclass(frozen=True)
class StateKey:
    """Where one producer state lives."""

    namespace: str
    hub: str
    group: str
    partition: str

    @classmethod
    def of(cls, endpoint: Any, group: str, partition: str) -> StateKey:
        """The key of ``group``'s state of ``partition`` on ``endpoint``'s hub (an ``EventHubsEndpoint``): the
        namespace in its one spelling and the hub's name in lower case, as the service treats it."""
        return cls(endpoint.namespace, endpoint.eventhub_name.lower(), group, str(partition))

    @property
    def blob_name(self) -> str:
        return f"{self.namespace}/{self.hub}/{self.group}/producer-state/{self.partition}".lower()

    def record_blob_name(self, kind: str, name: str) -> str:
        """A ledger record's blob: under ``_ledger/``, apart from the state documents (which the view lists)."""
        return f"_ledger/{self.namespace}/{self.hub}/{self.group}/{self.partition}/{kind}/{name}".lower()

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
    ledger: Ledger = field(default_factory=Ledger)
    pending: PendingIntent | None = None
    partial: dict[str, PartialBatch] = field(default_factory=dict)
    #: the committed batches of a version 1 document, until its first claim moves them into records
    unmigrated: dict[str, CommittedBatch] = field(default_factory=dict)

    @property
    def committed_count(self) -> int:
        """Committed batches kept, in records or (not migrated yet) inside a version 1 document."""
        return self.ledger.count + len(self.unmigrated)

    @property
    def last_committed(self) -> CommittedBatch | None:
        """The newest committed batch (with its ``batch_id``), wherever it is kept."""
        if self.unmigrated:
            batch_id, record = max(self.unmigrated.items(), key=lambda item: (item[1].last_seq, item[0]))
            return replace(record, batch_id=batch_id)
        return self.ledger.last

    def count_committed(self, record: CommittedBatch, *sent_up_to: int) -> None:
        """Count a committed batch whose records are written: the ledger moves on to it, the intent is done,
        and the last published sequence number covers it (and ``sent_up_to``, what the intent assigned)."""
        self.ledger = self.ledger.added(record)
        self.pending = None
        self.last_published_seq = max(self.last_published_seq, record.last_seq, *sent_up_to)

    @classmethod
    def new(cls, key: StateKey) -> ProducerState:
        return cls(key.namespace.lower(), key.hub.lower(), key.group, key.partition)

    def to_json(self) -> str:
        if self.unmigrated:  # a version 1 document is only ever written back after its claim moved them
            raise RuntimeError(f"{len(self.unmigrated)} committed batches of a version 1 document are not in records yet")
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
                "ledger": self.ledger.to_doc(),
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
        if doc.get("version") not in READABLE_VERSIONS:
            raise bad(f"has version {doc.get('version')!r}, this provider reads versions "
                      f"{', '.join(map(str, READABLE_VERSIONS))} (was it written by a newer release?)")
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
                ledger=Ledger() if doc["version"] == 1 else Ledger.from_doc(doc["ledger"]),
                pending=None if doc.get("pending") is None else PendingIntent.from_doc(doc["pending"]),
                partial={b: PartialBatch.from_doc(r) for b, r in (doc.get("partial") or {}).items()},
                unmigrated={} if doc["version"] != 1 else
                {b: CommittedBatch.from_doc(r) for b, r in (doc.get("committed") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise bad(f"misses or mangles field {exc}") from None


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

    # ---- ledger records: the backend stores, reads and deletes text by (kind, name) ----------------

    @abstractmethod
    def get_record(self, key: StateKey, kind: str, name: str) -> str | None:
        """The text of one ledger record (``kind`` :data:`BATCH` or :data:`HISTORY`), ``None`` when absent."""

    @abstractmethod
    def put_record(self, claim: C, kind: str, name: str, text: str) -> None:
        """Store one ledger record of the claimed state (replacing one of that name). The caller checks the claim."""

    @abstractmethod
    def delete_record(self, claim: C, kind: str, name: str) -> None:
        """Delete one ledger record of the claimed state; an absent one is no error."""

    def describe_record(self, key: StateKey, kind: str, name: str) -> str:
        """Where one record lives, for error messages."""
        return f"{kind} record {name!r} of {self.describe(key)}"

    def _record(self, key: StateKey, kind: str, name: str) -> CommittedBatch | None:
        text = self.get_record(key, kind, name)
        if text is None:
            return None
        where = self.describe_record(key, kind, name)
        try:
            record = CommittedBatch.from_doc(json.loads(text))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise InvalidProducerStateError(
                f"ledger record {where} for {key}: is not a committed batch ({exc}). Delete it to forget that batch "
                "(a re-run of it then publishes it again), or restore it from a backup."
            ) from None
        if record.batch_id is None or record.ordinal is None:
            raise InvalidProducerStateError(f"ledger record {where} for {key}: misses its batch_id or ordinal. Delete "
                                            "it to forget that batch (a re-run of it then publishes it again).")
        return record

    def find_committed(self, key: StateKey, batch_id: str) -> CommittedBatch | None:
        """The committed record of ``batch_id`` (one read), ``None`` when the batch is not committed (or was pruned)."""
        record = self._record(key, BATCH, record_name(batch_id))
        return record if record is not None and record.batch_id == batch_id else None

    def record_committed(self, claim: C, record: CommittedBatch) -> None:
        """Write a committed batch's two records (by batch id and by ordinal), the claim checked first.

        The state document counts it only when the caller writes it next (``ledger.add``); a crash in
        between leaves the batch's intent pending beside its records, which the next claim completes.
        """
        assert record.batch_id is not None and record.ordinal is not None
        claim.check()
        text = json.dumps(record.to_doc(), separators=(",", ":"))
        self.put_record(claim, BATCH, record_name(record.batch_id), text)
        self.put_record(claim, HISTORY, history_name(record.ordinal), text)

    def history(self, key: StateKey, *, before: int | None = None, limit: int = 50,
                state: ProducerState | None = None) -> HistoryPage:
        """One page of a ledger's committed batches, newest first, read by ordinal (nothing is listed).

        :param before: the page ends below this ordinal (``None``: the newest); a page's ``before`` is the next one.
        :param limit: batches per page, 1 to 1000.
        :param state: the state document, when the caller has just read it.
        """
        if not 1 <= limit <= 1000:
            raise ValueError(f"limit={limit!r}: a page holds 1 to 1000 batches")
        state = state if state is not None else self.read(key)
        if state is None:
            return HistoryPage([], 0, None)
        if state.unmigrated:  # a version 1 document nobody has claimed since the upgrade
            ordered = sorted(state.unmigrated.items(), key=lambda item: (item[1].last_seq, item[0]))
            migrated = [replace(r, batch_id=b, ordinal=i) for i, (b, r) in enumerate(ordered)]
            top = len(migrated) if before is None else max(0, min(before, len(migrated)))
            page = migrated[max(0, top - limit):top][::-1]
            return HistoryPage(page, len(migrated), page[-1].ordinal if page and (page[-1].ordinal or 0) > 0 else None)
        ledger = state.ledger
        top = ledger.next if before is None else max(ledger.first, min(before, ledger.next))
        ordinals = list(range(top - 1, max(ledger.first, top - limit) - 1, -1))
        found = _concurrently(lambda o: self._record(key, HISTORY, history_name(o)), ordinals)
        batches = [r for r in found if r is not None]  # a crash while pruning may leave a gap
        lowest = ordinals[-1] if ordinals else ledger.first
        return HistoryPage(batches, ledger.count, lowest if lowest > ledger.first else None)

    def prune(self, claim: C, state: ProducerState, *, keep_last: int | None = None,
              older_than: datetime | None = None) -> int:
        """Delete the records of the oldest committed batches: all but the ``keep_last`` newest, and those
        committed before ``older_than``; raises ``state.ledger.first`` (the caller writes the state).

        A pruned batch is forgotten: a re-run of it publishes it again. The newest batch is never pruned.
        Records are deleted before the state moves past them, so a crash leaves at most records that
        the next prune deletes again, never a counted batch without its records.
        """
        ledger = state.ledger
        cut = ledger.first
        if keep_last is not None:
            cut = max(cut, ledger.next - max(1, keep_last))
        if older_than is not None:
            while cut < ledger.next - 1:
                record = self._record(claim.key, HISTORY, history_name(cut))
                committed = parse_time(record.committed_at) if record is not None else None
                if record is not None and (committed is None or committed >= older_than):
                    break
                cut += 1
        cut = min(cut, ledger.next - 1) if ledger.next else cut
        if cut <= ledger.first:
            return 0
        claim.check()

        def forget(ordinal: int) -> None:
            record = self._record(claim.key, HISTORY, history_name(ordinal))
            if record is not None and record.batch_id is not None:
                current = self._record(claim.key, BATCH, record_name(record.batch_id))
                if current is not None and current.ordinal == ordinal:  # not a later republish of the same id
                    self.delete_record(claim, BATCH, record_name(record.batch_id))
            self.delete_record(claim, HISTORY, history_name(ordinal))

        gone = list(range(ledger.first, cut))
        _concurrently(forget, gone)
        state.ledger = ledger.pruned(cut)
        return len(gone)

    def _migrate(self, claim: C, state: ProducerState) -> None:
        """Move a version 1 document's committed batches into records (ordinals in sequence-number order)."""
        ordered = sorted(state.unmigrated.items(), key=lambda item: (item[1].last_seq, item[0]))
        records = [replace(r, batch_id=b, ordinal=state.ledger.next + i) for i, (b, r) in enumerate(ordered)]
        started = time.monotonic()
        chunk = 1024
        for at in range(0, len(records), chunk):
            claim.check()
            part = records[at:at + chunk]
            texts = [json.dumps(r.to_doc(), separators=(",", ":")) for r in part]
            pairs = list(zip(part, texts, strict=True))
            _concurrently(lambda pair: self.put_record(claim, BATCH, record_name(pair[0].batch_id), pair[1]), pairs)
            _concurrently(lambda pair: self.put_record(claim, HISTORY, history_name(pair[0].ordinal), pair[1]), pairs)
        for record in records:
            state.ledger = state.ledger.added(record)
        state.unmigrated = {}
        log.info("%s: moved %d committed batches of a version 1 state document into ledger records in %.1fs",
                 claim.key, len(records), time.monotonic() - started)

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
            if state.unmigrated:
                self._migrate(claim, state)
            if owner_level is not None and owner_level < state.owner_level:
                raise ProducerDisconnectedError(
                    f"{key}: owner level {owner_level} asked for, but a publisher with owner level "
                    f"{state.owner_level} has claimed the partition; use a higher owner level or none."
                )
            state.owner_level = (owner_level if owner_level is not None and owner_level > state.owner_level
                                 else state.owner_level + 1)
            state.claim_token = uuid.uuid4().hex
            if starting_sequence_number is not None:
                if state.last_published_seq < 0 and not state.committed_count and state.pending is None:
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


T = TypeVar("T")


def _concurrently(call: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
    """``call`` on every item, :data:`RECORD_THREADS` at a time; results in item order, the first error raised."""
    items = list(items)
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(min(RECORD_THREADS, len(items)), thread_name_prefix="eh-ledger") as pool:
        return list(pool.map(call, items))


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
