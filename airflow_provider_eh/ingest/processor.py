"""What happens to one batch of one partition inside its sink's transaction.

In order, for every event of the batch:

1. **dedupe**: a stamped event (``eh.group``, ``eh.seq``) at or below its (producer group,
   partition) high-water mark is a duplicate and skipped; otherwise the mark moves up to it;
2. **sessions** (when configured): an event ahead of its session's next sequence is deferred into
   the ``deferred`` table; one at the next sequence is applied and then every deferred successor
   that is now in order; one behind it is a duplicate; one in a completed session is dead-lettered;
3. **apply**: the row function maps the event to rows; if it raises, the event becomes a dead letter.

A typed event (its content type names a schema id: ``avro/binary+<id>``, Microsoft's JSON Schema
encoder's) is decoded before sessions and the row function see it (:mod:`~airflow_provider_eh.client.typed_events`):
its ``json()`` is then the decoded record, so the default row function maps its fields to columns as
it maps a JSON body's keys. One that does not decode (unknown schema id, corrupt content, no registry
configured) becomes a dead letter ``undecodable`` naming the partition, sequence number and schema id.

Then the rows are inserted (one bulk write per column set, undone alone if the sink refuses a
row: the events are then retried one by one, each undone alone, and the refused ones are dead-lettered), deferred
events older than the session limit become dead letters, the marks are saved and the checkpoint
is advanced by compare-and-set, all in the same transaction.

The transaction is any sink's (:mod:`~airflow_provider_eh.ingest.sinks.contract`): sessions need one that keeps
them (:class:`~airflow_provider_eh.ingest.sinks.contract.SessionTransaction`), a replay one that marks a dead letter
replayed; a sink without them is refused, naming the setting, before an event is applied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.client.typed_events import TypedDecoder, typed_content
from airflow_provider_eh.errors import MissingExtraError, SinkConfigError, UndecodableEventError
from airflow_provider_eh.ingest.events import STAMP_GROUP, STAMP_SEQ, IngestEvent
from airflow_provider_eh.ingest.rows import Row, RowFunction, json_rows, rows_of
from airflow_provider_eh.ingest.sessions import FieldRef, SessionConfig
from airflow_provider_eh.ingest.sinks.contract import (
    BatchTransaction,
    ColumnsTransaction,
    ReplayTransaction,
    SessionTransaction,
    Sink,
    ValueRefusedError,
    sessions_refused,
    utc_text,
)

#: the dead-letter reason of a typed event that does not decode
UNDECODABLE = "undecodable"


@dataclass
class BatchResult:
    """Counts of one batch (or of many, added up)."""

    events: int = 0
    applied: int = 0
    rows: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    deferred: int = 0
    released: int = 0
    first_sequence_number: int | None = None
    last_sequence_number: int | None = None

    def add(self, other: BatchResult) -> None:
        for name in ("events", "applied", "rows", "duplicates", "dead_letters", "deferred", "released"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.first_sequence_number is not None and self.first_sequence_number is None:
            self.first_sequence_number = other.first_sequence_number
        if other.last_sequence_number is not None:
            self.last_sequence_number = other.last_sequence_number

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class BatchProcessor:
    """
    Applies batches inside a sink's :class:`~airflow_provider_eh.ingest.sinks.contract.BatchTransaction`.

    :param table: the target table, as the sink names tables (SQL: ``table`` or ``schema.table``; a Delta sink
        writes its own table and only names this one in errors).
    :param row_function: event -> row, rows or ``None``; default :func:`json_rows`.
    :param sessions: in-order processing per session, or ``None``.
    :param dedupe: skip stamped events at or below their high-water mark.
    :param decoder: decodes typed events (Schema Registry); ``None``: no registry, a typed event is dead-lettered
        with a reason saying to configure one. Events that are not typed never reach it.
    """

    def __init__(
        self,
        table: str,
        row_function: RowFunction | None = None,
        *,
        sessions: SessionConfig | None = None,
        dedupe: bool = True,
        decoder: TypedDecoder | None = None,
    ):
        if not isinstance(table, str) or not table:
            raise SinkConfigError(f"table {table!r}: name the table the rows go to")
        self.table = table
        self.row_function = row_function or json_rows()
        self.sessions = sessions
        self.dedupe = dedupe
        self.decoder = decoder or TypedDecoder(None)

    def check_sink(self, sink: Sink) -> None:
        """Refuse, before an event is read, a sink that cannot do what this processor is configured for."""
        if self.sessions is not None and not sink.keeps_sessions:
            raise sessions_refused(type(sink).__name__)

    def process(self, tx: BatchTransaction, partition_id: str, events: Sequence[IngestEvent]) -> BatchResult:
        """Apply ``events`` (one partition, in order); the caller advances the checkpoint and commits."""
        session_tx = _session_transaction(tx) if self.sessions is not None else None
        result = BatchResult(events=len(events))
        if events:
            result.first_sequence_number = events[0].sequence_number
            result.last_sequence_number = events[-1].sequence_number
        stamps = _stamps(events) if self.dedupe else []
        marks = tx.marks(partition_id, {group for group, _ in stamps if group}) if self.dedupe else {}
        changed: dict[str, int] = {}
        decoded = self._decode_all(tx, events)
        applied: list[tuple[IngestEvent, list[Row]]] = []
        sessions: dict[str, list[Any]] = {}
        row_function = self.row_function

        def apply(event: IngestEvent) -> None:
            try:
                # the checks of _decoded and rows_of written out for the common case: an untyped event, one row
                value = row_function(event if event.content_type is None else self._decoded(event))
                rows: list[Row] = [value] if type(value) is dict else rows_of(value)
            except UndecodableEventError as exc:
                self._undecodable(tx, event, exc, result)
                return
            except Exception as exc:
                tx.dead_letter(event, "rejected", _describe(exc))
                result.dead_letters += 1
                return
            applied.append((event, rows))
            result.applied += 1

        for i, event in enumerate(events):
            if self.dedupe:
                group, seq = stamps[i]
                if group is not None and seq is not None:
                    if seq <= marks.get(group, -1):
                        result.duplicates += 1
                        continue
                    marks[group] = changed[group] = seq
            if decoded is not None and i in decoded:  # before sessions: a key or sequence may be a field of the record
                found = decoded[i]
                if isinstance(found, UndecodableEventError):
                    self._undecodable(tx, event, found, result)
                    continue
                event = found
            if session_tx is None:
                apply(event)
            else:
                self._in_session(session_tx, event, sessions, apply, result)

        if session_tx is not None:
            for key, (next_sequence, completed) in sessions.items():
                session_tx.save_session(key, next_sequence, completed)
            if events:
                self._expire(session_tx, events, result)
        result.rows = self._write(tx, applied, result)
        if changed:
            tx.save_marks(partition_id, changed)
        return result

    def replay(self, tx: BatchTransaction, event: IngestEvent) -> str | None:
        """
        Apply a dead-lettered event again, bypassing dedupe and sessions (it passed them once).

        :return: ``None`` when its rows were written and the dead letter is marked ``replayed``;
            otherwise the error, recorded on the dead letter (``attempts`` goes up).
        """
        if not isinstance(tx, ReplayTransaction):
            raise SinkConfigError(f"{type(tx).__name__} cannot mark a dead letter replayed; replay through its sink's own "
                                  "replay (a Delta sink: airflow_provider_eh.ingest.delta_replay)")
        try:
            event = self._decoded(event)
            self._prepare_columns(tx, [event])
            rows = rows_of(self.row_function(event))
            tx.insert_rows(self.table, rows, alone=True)
        except UndecodableEventError as exc:
            error = _undecodable_text(event, exc)
            tx.dead_letter(event, UNDECODABLE, error)
            return error
        except Exception as exc:
            if isinstance(exc, (SinkConfigError, MissingExtraError)) or (tx.is_driver_error(exc) and not tx.is_data_error(exc)):
                raise
            error = _describe(exc)
            tx.dead_letter(event, "rejected", error)
            return error
        tx.mark_replayed(event)
        return None

    # -- typed events -----------------------------------------------------------------------

    def _decoded(self, event: IngestEvent) -> IngestEvent:
        """A typed event with its decoded value (:class:`UndecodableEventError` when it does not decode); any
        other event as it is."""
        if event.decoded is not None or event.content_type is None or typed_content(event.content_type) is None:
            return event
        return event.with_decoded(self.decoder.decode(event.body, event.content_type))

    def _decode_all(self, tx: BatchTransaction, events: Sequence[IngestEvent]) -> dict[int, Any] | None:
        """The batch's typed events decoded (by index: the event, or its :class:`UndecodableEventError`), and the table
        made to fit their schemas before anything of the batch is written; ``None`` when the batch has none."""
        found: dict[int, Any] = {}
        for i, event in enumerate(events):
            if event.content_type is not None and typed_content(event.content_type) is not None:
                try:
                    found[i] = self._decoded(event)
                except UndecodableEventError as exc:
                    found[i] = exc
        if not found:
            return None
        self._prepare_columns(tx, [e for e in found.values() if isinstance(e, IngestEvent)])
        return found

    def _prepare_columns(self, tx: BatchTransaction, events: Sequence[IngestEvent]) -> None:
        """Have a sink that can (:class:`ColumnsTransaction`) create or widen the table for the schemas of ``events``:
        their fields, those of the row function's ``columns`` where it names them."""
        if not isinstance(tx, ColumnsTransaction):
            return
        columns = getattr(self.row_function, "columns", None)
        fields: dict[str, Any] = {}
        changed: dict[str, Any] = {}  # a field another schema of the batch gives another type: its column must hold both
        seen: set[str | None] = set()
        for event in events:
            if event.content_type in seen:
                continue
            seen.add(event.content_type)
            for name, kind in self.decoder.fields(event.content_type).items():
                if columns is not None and name not in columns:
                    continue
                if name not in fields:
                    fields[name] = kind
                elif fields[name] != kind:
                    changed[name] = kind
        if fields:
            tx.prepare_columns(self.table, fields)
        if changed and getattr(tx, "checks_every_schema", False):  # a Delta column has one exact type: the first's
            tx.prepare_columns(self.table, changed)

    def _undecodable(self, tx: BatchTransaction, event: IngestEvent, exc: UndecodableEventError, result: BatchResult) -> None:
        tx.dead_letter(event, UNDECODABLE, _undecodable_text(event, exc))
        result.dead_letters += 1

    # -- sessions ---------------------------------------------------------------------------

    def _in_session(
        self,
        tx: SessionTransaction,
        event: IngestEvent,
        sessions: dict[str, list[Any]],
        apply: Callable[[IngestEvent], None],
        result: BatchResult,
    ) -> None:
        cfg = self.sessions
        assert cfg is not None
        try:
            key = str(cfg.key.get(event))
            seq = int(cfg.sequence.get(event))
        except Exception as exc:
            tx.dead_letter(
                event, "bad_session",
                f"no session key ({cfg.key}) or sequence ({cfg.sequence}) in event {event.sequence_number} of "
                f"partition {event.partition_id}: {_describe(exc)}",
            )
            result.dead_letters += 1
            return
        if key not in sessions:
            stored = tx.session(key)
            sessions[key] = list(stored) if stored else [cfg.first_sequence, False]
        state = sessions[key]
        if state[1]:
            tx.dead_letter(
                event, "session_completed",
                f"session {key!r} was completed before its sequence {seq} arrived; replay it if it still matters",
            )
            result.dead_letters += 1
            return
        if seq < state[0]:
            result.duplicates += 1
            return
        if seq > state[0]:
            if tx.defer(key, seq, event):
                result.deferred += 1
            else:
                result.duplicates += 1
            return
        self._apply_in_order(tx, key, event, state, apply, result)

    def _apply_in_order(
        self,
        tx: SessionTransaction,
        key: str,
        event: IngestEvent | None,
        state: list[Any],
        apply: Callable[[IngestEvent], None],
        result: BatchResult,
    ) -> None:
        cfg = self.sessions
        assert cfg is not None
        first = True
        while event is not None:
            apply(event)
            if not first:
                result.released += 1
            first = False
            state[0] += 1
            if cfg.end is not None and _truthy(cfg.end, event):
                state[1] = True
                for seq in tx.pending_in_session(key):
                    late = tx.take_deferred(key, seq)
                    if late is not None:
                        tx.dead_letter(late, "session_completed", f"session {key!r} completed before sequence {seq}")
                        result.dead_letters += 1
                return
            event = tx.take_deferred(key, state[0])

    def _expire(self, tx: SessionTransaction, events: Sequence[IngestEvent], result: BatchResult) -> None:
        cfg = self.sessions
        assert cfg is not None
        newest = max((e.enqueued_time for e in events if e.enqueued_time), default=None)
        if newest is None:
            return
        for key, seq, event in tx.take_expired_deferred(utc_text(newest - cfg.defer_limit)):  # type: ignore[arg-type]
            state = tx.session(key)
            waited_for = state[0] if state else cfg.first_sequence
            tx.dead_letter(
                event, "session_expired",
                f"session {key!r}: sequence {seq} waited more than {cfg.defer_limit} for sequence {waited_for}, "
                "which never arrived; replay it once the gap is resolved",
            )
            result.dead_letters += 1

    # -- rows --------------------------------------------------------------------------------

    def _write(self, tx: BatchTransaction, applied: list[tuple[IngestEvent, list[Row]]], result: BatchResult) -> int:
        rows = [row for _, event_rows in applied for row in event_rows]
        if not rows:
            return 0
        try:
            tx.insert_rows(self.table, rows, alone=True)
            return len(rows)
        except Exception as exc:
            if not tx.is_data_error(exc):
                raise SinkConfigError(
                    f"Inserting into {self.table!r} failed ({type(exc).__name__}: {exc}); check the table and the "
                    "columns the row function returns."
                ) from exc
        written = 0
        for event, event_rows in applied:
            try:
                tx.insert_rows(self.table, event_rows, alone=True)
                written += len(event_rows)
            except Exception as exc:
                if not tx.is_data_error(exc):
                    raise
                tx.dead_letter(event, "row_rejected", _refused_text(self.table, event, exc))
                result.dead_letters += 1
                result.applied -= 1
        return written


def _stamps(events: Sequence[IngestEvent]) -> list[tuple[str | None, int | None]]:
    """Each event's ``(producer_group, producer_sequence_number)``, as those properties give them, in one loop."""
    stamps: list[tuple[str | None, int | None]] = []
    append = stamps.append
    for event in events:
        properties = event.properties
        group = properties.get(STAMP_GROUP)
        if group is None:
            append((None, event.producer_sequence_number))
            continue
        seq = properties.get(STAMP_SEQ)
        append((group if type(group) is str else str(group),
                seq if type(seq) is int else event.producer_sequence_number))
    return stamps


def _truthy(ref: FieldRef, event: IngestEvent) -> bool:
    try:
        value = ref.get(event)
    except Exception:
        return False
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def _session_transaction(tx: BatchTransaction) -> SessionTransaction:
    if not isinstance(tx, SessionTransaction):
        raise sessions_refused(type(tx).__name__)
    return tx


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _refused_text(table: str, event: IngestEvent, exc: BaseException) -> str:
    """Why ``table`` refused an event's rows: its partition and sequence number, and the field and type when the sink
    named them (:class:`ValueRefusedError`)."""
    where = f"event {event.sequence_number} of partition {event.partition_id}"
    if isinstance(exc, ValueRefusedError):
        return f"{where}: table {table!r} cannot hold {exc}; fix the value or the column, then replay the dead letter"
    return f"{where}: table {table!r} refused the rows: {_describe(exc)}"


def _undecodable_text(event: IngestEvent, exc: UndecodableEventError) -> str:
    return f"event {event.sequence_number} of partition {event.partition_id}: {exc}"
