"""What a sink is to the ingestion engine: a contract both sinks implement in full, and the records they share.

A :class:`Sink` keeps a stream's checkpoints and opens one :class:`BatchTransaction` per batch. What the
transaction is given (rows, dead letters, dedupe marks, the checkpoint's compare-and-set) lands together when
the ``with`` block ends, or not at all when it raises. The engine (:class:`~airflow_provider_eh.ingest.runner.IngestRun`,
:class:`~airflow_provider_eh.ingest.processor.BatchProcessor`) sees sinks only through this module.

Two capabilities go beyond a batch, and a sink declares whether it has them:

- :class:`SessionTransaction`: per-session state and deferred events that change in place with every event
  (in-order processing). The SQL sink keeps them; the Delta sink does not (``keeps_sessions = False``), and the
  engine refuses ``session_key`` on it before any event is read.
- :class:`ReplayTransaction`: a dead letter marked replayed in the transaction that writes its rows
  (:meth:`~airflow_provider_eh.ingest.processor.BatchProcessor.replay`).

And one capability of typed events: :class:`ColumnsTransaction`, a table created from the schema the events carry
(and given a column for a field the schema gains) before the batch writes anything. A sink without it writes typed
rows to a table that must hold them already.

A value a sink cannot hold is :class:`ValueRefusedError` (naming the column and its type): a data error, so its
event alone is dead-lettered and the rest of the batch loads.

A new sink is a folder beside ``sql/`` and ``delta/`` whose classes satisfy these protocols (mypy checks it
where the operators hand a store to the engine); nothing in the engine changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, runtime_checkable

from airflow_provider_eh.client.schema_types import FieldType
from airflow_provider_eh.errors import EventHubsProviderError, SinkConfigError
from airflow_provider_eh.ingest.events import IngestEvent

#: a partition's checkpoint where none was committed yet
NO_CHECKPOINT = -1


def utc_text(moment: datetime | None) -> str | None:
    """A UTC timestamp as fixed-width ISO 8601 text, so that text order is time order."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def utc_now() -> str:
    """The current UTC time as the sinks store times (:func:`utc_text`)."""
    return utc_text(datetime.now(UTC))  # type: ignore[return-value]


def sessions_refused(sink: str) -> SinkConfigError:
    """The error for ``session_key`` on a sink that keeps no sessions (``sink`` names it), saying what to do."""
    return SinkConfigError(
        f"session_key: in-order sessions keep deferred events and per-session state that change in place with every "
        f"event; {sink} does not keep them. Unset session_key (the rows are then written in partition order), or "
        "ingest into a SQL sink (sql_conn_id) for sessions.")


class ValueRefusedError(EventHubsProviderError, ValueError):
    """A value of a row that the sink cannot hold in its column: the row's event is dead-lettered, naming the column
    and the value's type, and the rest of the batch loads.

    :param column: the column (a field of the record, for the default row function).
    :param type_name: the value's type, as Python names it.
    :param why: what the sink could not do with it.
    """

    def __init__(self, column: str, type_name: str, why: str):
        super().__init__(f"field {column!r} ({type_name}): {why}")
        self.column = column
        self.type_name = type_name


@dataclass(frozen=True)
class Stream:
    """
    What a sink's state is keyed by.

    :param namespace: the fully qualified namespace, lower-cased.
    :param eventhub: the hub.
    :param consumer_group: the consumer group whose progress this is.
    """

    namespace: str
    eventhub: str
    consumer_group: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace.lower(), self.eventhub, self.consumer_group)


@dataclass(frozen=True)
class PartitionCheckpoint:
    """
    A partition's checkpoint as a sink holds it.

    :param partition_id: the partition.
    :param sequence_number: the last event applied, ``-1`` when none.
    :param offset: that event's offset.
    :param owner_id: the instance that committed it (``None`` where the sink does not keep it).
    :param updated_at: when, ISO 8601 (``None`` where the sink does not keep it).
    """

    partition_id: str
    sequence_number: int
    offset: str | None
    owner_id: str | None
    updated_at: str | None


@runtime_checkable
class BatchTransaction(Protocol):
    """What one batch of one partition writes; it lands with the checkpoint's compare-and-set, or not at all."""

    def advance_checkpoint(
        self, partition_id: str, expected: int, sequence_number: int, offset: str | None, owner_id: str
    ) -> None:
        """Move the checkpoint from ``expected``; :class:`~airflow_provider_eh.errors.PartitionTakenOverError`
        when another instance moved it."""

    def marks(self, partition_id: str, groups: Iterable[str]) -> dict[str, int]:
        """The dedupe high-water marks of ``groups`` on the partition (absent: none yet)."""

    def save_marks(self, partition_id: str, marks: Mapping[str, int]) -> None:
        """Move the high-water marks up with this batch."""

    def insert_rows(self, table: str, rows: Sequence[Mapping[str, Any]], *, alone: bool = False) -> None:
        """
        Write ``rows`` with this batch.

        :param table: the table the processor names (a sink with one table of its own may ignore it).
        :param alone: a row the sink cannot hold undoes this call only, and the batch goes on.
        """

    def savepoint(self) -> AbstractContextManager[None]:
        """A scope whose writes are undone alone if its block raises."""

    def dead_letter(self, event: IngestEvent, reason: str, error: str) -> None:
        """Keep ``event`` as a dead letter with this batch (once: again for the same event replaces it)."""

    def is_data_error(self, exc: BaseException) -> bool:
        """Whether the sink refused a row for its content (dead-lettered), not for the sink's state (raised)."""

    def is_driver_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` came from the sink's own library, not from user code."""


@runtime_checkable
class SessionTransaction(BatchTransaction, Protocol):
    """A batch transaction that also keeps in-order sessions and the events deferred in them."""

    def session(self, session_key: str) -> tuple[int, bool] | None:
        """The session's ``(next sequence, completed)``; ``None`` for a session not seen yet."""

    def save_session(self, session_key: str, next_sequence: int, completed: bool) -> None: ...

    def defer(self, session_key: str, session_sequence: int, event: IngestEvent) -> bool:
        """Keep ``event`` until its predecessors are applied; ``False`` if that position is already held."""

    def take_deferred(self, session_key: str, session_sequence: int) -> IngestEvent | None: ...

    def take_expired_deferred(self, enqueued_before: str) -> list[tuple[str, int, IngestEvent]]: ...

    def pending_in_session(self, session_key: str) -> list[int]: ...


@runtime_checkable
class ReplayTransaction(BatchTransaction, Protocol):
    """A batch transaction that can mark a dead letter replayed with the rows it writes."""

    def mark_replayed(self, event: IngestEvent) -> None: ...


@runtime_checkable
class ColumnsTransaction(BatchTransaction, Protocol):
    """A batch transaction whose sink makes its table fit the schema of the typed events it is about to write."""

    def prepare_columns(self, table: str, fields: Mapping[str, FieldType]) -> None:
        """
        Before anything of the batch is written: create ``table`` from ``fields`` when it does not exist; add a column
        for a field it lacks where the sink allows it; :class:`~airflow_provider_eh.errors.SinkConfigError` naming the
        field and what to do for a change it cannot apply.
        """


class Sink(Protocol):
    """
    Where an ingestion run writes: a stream's checkpoints and one transaction per batch.

    :attr keeps_sessions: whether its transactions are :class:`SessionTransaction` s.
    """

    keeps_sessions: ClassVar[bool]
    stream: Stream

    def checkpoints(self, partition_ids: Iterable[str]) -> Mapping[str, PartitionCheckpoint]:
        """Each partition's checkpoint as committed (``-1`` where none was)."""

    def transaction(self) -> AbstractContextManager[BatchTransaction]:
        """One batch: what the block gives the transaction lands when it ends, nothing of it when it raises."""

    def close(self) -> None: ...
