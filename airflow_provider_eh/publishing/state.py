"""The producer state store: the interface both backends implement, and the ledger's records through it.

:class:`ProducerStateStore` claims a state (owner level + 1, exclusive: a
:class:`~airflow_provider_eh.publishing.claim.StateClaim`), writes it (compare-and-swap) and releases
it; the backends (:mod:`~airflow_provider_eh.publishing.blob_store`,
:mod:`~airflow_provider_eh.publishing.variable_store`) store text by name, and on top of that this
interface finds, writes, pages and prunes the committed batches' records, and moves a version 1
document's batches into records on its first claim. The document and the records it is made of are
described in :mod:`~airflow_provider_eh.publishing.document`.

A store may be given an :data:`OperationTimer` (``on_operation``): each operation a caller makes
(:data:`OPERATIONS`) is timed and reported to it with the state's key, so the Airflow layer can emit
the ledger's latency without the engine importing Airflow. An operation's own inner calls (the
claim's first write, a write's read-back) count as part of it, not again on their own.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from airflow_provider_eh.errors import InvalidProducerStateError, ProducerDisconnectedError
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.records import (
    BATCH,
    HISTORY,
    CommittedBatch,
    HistoryPage,
    history_name,
    parse_time,
    record_name,
)

log = logging.getLogger(__name__)

#: record calls made at once when many records are read, moved or deleted (a page, a migration, a prune)
RECORD_THREADS = 16

#: the operations a store times: its name for each, and what it is
OPERATIONS = {
    "claim": "take a partition's state: the blob lease or the Variable token, the owner level raised and written",
    "write": "replace the claimed state document (compare-and-swap): the intent before a send, the commit after it",
    "read": "read a state document without claiming it (on the Variables backend also each claim-token check)",
    "lookup": "read a batch's committed record: is this batch committed already",
    "record": "write a committed batch's two records",
    "release": "give up the claim (the blob lease)",
    "prune": "delete the records of the oldest committed batches",
    "history": "read one page of committed batches",
}

#: called after each timed operation: ``(operation, key, seconds)``; it must not raise
OperationTimer = Callable[[str, StateKey, float], None]

_TIMING = threading.local()  # set while an operation of this thread is timed: its inner calls are part of it

F = TypeVar("F", bound=Callable[..., Any])


def timed(operation: str) -> Callable[[F], F]:
    """Report the decorated store method's duration to the store's ``on_operation`` as ``operation`` (an
    outermost call only). The method's first argument is a :class:`StateKey` or a claim holding one."""
    assert operation in OPERATIONS, operation

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(self: ProducerStateStore[Any], target: Any, *args: Any, **kwargs: Any) -> Any:
            timer = self.on_operation
            if timer is None or getattr(_TIMING, "active", False):
                return method(self, target, *args, **kwargs)
            _TIMING.active = True
            started = time.monotonic()
            try:
                return method(self, target, *args, **kwargs)
            finally:
                _TIMING.active = False
                key = target if isinstance(target, StateKey) else target.key
                try:
                    timer(operation, key, time.monotonic() - started)
                except Exception as exc:  # timing never fails an operation
                    log.debug("%s: timing %s not reported: %s", key, operation, exc)

        return cast(F, call)

    return wrap


C = TypeVar("C", bound=StateClaim)


class ProducerStateStore(ABC, Generic[C]):
    """Claim, compare-and-swap writes and release of producer states; two backends implement it, each with
    its claim type ``C``."""

    #: the backend's name, as metrics tag it
    backend: str = ""
    #: reported the duration of each operation (:func:`timed`); ``None``: nothing is timed
    on_operation: OperationTimer | None = None

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

    @timed("lookup")
    def find_committed(self, key: StateKey, batch_id: str) -> CommittedBatch | None:
        """The committed record of ``batch_id`` (one read), ``None`` when the batch is not committed (or was pruned)."""
        record = self._record(key, BATCH, record_name(batch_id))
        return record if record is not None and record.batch_id == batch_id else None

    @timed("record")
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

    @timed("history")
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

    @timed("prune")
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

    @timed("claim")
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
