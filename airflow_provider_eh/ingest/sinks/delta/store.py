"""The Delta Lake sink: rows and their checkpoint in one Delta commit (no Airflow import).

:class:`DeltaIngestStore` is the Delta counterpart of :class:`~airflow_provider_eh.ingest.sinks.sql.SqlIngestStore`
for :class:`~airflow_provider_eh.ingest.runner.IngestRun`, through the ``deltalake`` package (delta-rs, no JVM); it
and its :class:`DeltaTransaction` satisfy :mod:`~airflow_provider_eh.ingest.sinks.contract` (without sessions).
A partition's checkpoint is a Delta *application transaction* (a ``txn`` action of the table's log): app id
``eventhubs/<namespace>/<hub>/<consumer group>/<partition>``, version the last sequence number committed. It is
written in the same commit as the batch's rows, so the table holds a batch's rows exactly when its log holds
the checkpoint after them, and a resumed run reads where to start from the log. The dedupe high-water marks
are application transactions as well (``.../<partition>/dedupe/<producer group>``, version the mark).

Two writers of one partition race on the commit: delta-rs refuses a commit when a commit that landed after
the snapshot it read carries an application transaction of the same app id (``CommitFailedError``:
concurrent transaction), and the version is also compared before the commit; after any error of the
library's (``DeltaError``) the log is read again, and where the partition's checkpoint moved the loser's
batch is not written and it gives the partition up (:class:`~airflow_provider_eh.errors.PartitionTakenOverError`), as the
SQL store's compare-and-set does. Writers of different partitions of one table do not conflict.

Dead letters go to a Delta table of their own, committed just before the batch with an application
transaction of its own per partition; a batch received again after a crash between the two commits writes
only the dead letters after that table's version, so each event is dead-lettered once. Replaying them is
:mod:`airflow_provider_eh.ingest.delta_replay`.

Sessions and deferred events need per-event state that changes in place; the Delta store does not keep
them (``keeps_sessions = False``: the engine refuses ``session_key`` on it, as :func:`check_delta_options` does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_eh.client.schema_types import FieldType
from airflow_provider_eh.errors import PartitionTakenOverError, SinkConfigError
from airflow_provider_eh.ingest.events import IngestEvent
from airflow_provider_eh.ingest.sinks.contract import (
    NO_CHECKPOINT,
    PartitionCheckpoint,
    Stream,
    ValueRefusedError,
)
from airflow_provider_eh.ingest.sinks.delta.columns import arrow_schema, prepare_table, to_arrow
from airflow_provider_eh.ingest.sinks.delta.dead_letters import dead_letter_row, dead_letter_schema, dead_letter_uri
from airflow_provider_eh.ingest.sinks.delta.target import (
    MERGE,
    DataError,
    DeltaTarget,
)

log = logging.getLogger(__name__)

# commitInfo keys of a batch's commit (custom metadata): where a run finds a partition's offset again
META_PARTITION = "eh.ingest.partition_id"
META_OFFSET = "eh.ingest.offset"
META_SEQUENCE = "eh.ingest.sequence_number"
_OFFSET_HISTORY = 200  # commits looked back for a partition's offset that this process did not commit


def open_table(uri: str, storage_options: dict[str, str] | None) -> Any:
    """The table at ``uri``, or ``None`` when there is none yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return None


class DeltaTransaction:
    """What one batch writes: buffered here, committed by :meth:`DeltaIngestStore.transaction` at its end."""

    def __init__(self, store: DeltaIngestStore):
        self._store = store
        self.rows: list[Mapping[str, Any]] = []
        self.tables: list[Any] = []  # the rows as Arrow tables of the table's schema, as converted by insert_rows
        self.dead_letters: list[dict[str, Any]] = []
        self.marks_to_save: dict[str, int] = {}
        self.partition_id: str | None = None
        self.version: int | None = None  # the checkpoint this commit sets
        self.expected: int | None = None
        self.offset: str | None = None

    # -- checkpoint ------------------------------------------------------------------------

    def advance_checkpoint(
        self, partition_id: str, expected: int, sequence_number: int, offset: str | None, owner_id: str
    ) -> None:
        """Set the partition's checkpoint in this commit; raise if the table's has moved from ``expected``."""
        current = self._store.checkpoint_of(partition_id)
        if current != expected:
            raise PartitionTakenOverError(
                f"Partition {partition_id!r} of {'/'.join(self._store.stream.key)}: the Delta table "
                f"{self._store.target.uri!r} is checkpointed at sequence number {current}, not {expected} as read "
                "before this batch; another instance processed it. This batch was not written; the partition is "
                "left to that instance."
            )
        self.partition_id, self.expected, self.version, self.offset = partition_id, expected, sequence_number, offset

    # -- dedupe marks ----------------------------------------------------------------------

    def marks(self, partition_id: str, groups: Iterable[str]) -> dict[str, int]:
        found = {}
        for group in sorted(set(groups)):
            mark = self._store.txn_version(self._store.dedupe_app_id(partition_id, group))
            if mark is not None:
                found[group] = mark
        return found

    def save_marks(self, partition_id: str, marks: Mapping[str, int]) -> None:
        self.partition_id = partition_id
        self.marks_to_save.update(marks)

    # -- rows and dead letters -------------------------------------------------------------

    def insert_rows(self, table: str, rows: Sequence[Mapping[str, Any]], *, alone: bool = False) -> None:
        """Buffer ``rows``, converted to the table's columns now so that a row it cannot hold raises here, before
        any of them is buffered: a refused call leaves nothing behind, so it is always undone alone (``alone``
        is the SQL stores' request for that, met here as it is)."""
        self.tables.append(self._store.arrow_rows(rows))
        self.rows.extend(rows)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A scope whose buffered rows and dead letters are dropped if its block raises."""
        rows, tables, letters = len(self.rows), len(self.tables), len(self.dead_letters)
        try:
            yield
        except BaseException:
            del self.rows[rows:]
            del self.tables[tables:]
            del self.dead_letters[letters:]
            raise

    def is_data_error(self, exc: BaseException) -> bool:
        return isinstance(exc, (DataError, ValueRefusedError))

    def prepare_columns(self, table: str, fields: Mapping[str, FieldType]) -> None:
        """A table to create takes its columns from the schema's ``fields``; an existing one gets a column for a field
        it lacks (:func:`~.columns.prepare_table`)."""
        self._store.prepare_columns(fields)

    def is_driver_error(self, exc: BaseException) -> bool:
        import pyarrow as pa
        from deltalake.exceptions import DeltaError

        return isinstance(exc, (DataError, ValueRefusedError, DeltaError, pa.ArrowException))

    def dead_letter(self, event: IngestEvent, reason: str, error: str) -> None:
        self.dead_letters.append(dead_letter_row(self._store.stream, event, reason, error))


@dataclass
class CommitCounts:
    """What the store committed in this process: for reports and benchmarks."""

    commits: int = 0
    dead_letter_commits: int = 0
    taken_over: int = 0
    offsets: dict[str, tuple[int, str | None]] = field(default_factory=dict)  # partition -> (seq, offset)


class DeltaIngestStore:
    """
    The Delta table of one stream's rows and its checkpoints, for :class:`~airflow_provider_eh.ingest.runner.IngestRun`.

    :param target: the table and how to write it.
    :param stream: the hub and consumer group the checkpoints belong to.
    """

    keeps_sessions: ClassVar[bool] = False

    def __init__(self, target: DeltaTarget, stream: Stream):
        self.target = target
        self.stream = stream
        self.counts = CommitCounts()
        self._table = open_table(target.uri, target.storage_options)
        self._schema: Any = None
        self._new_schema: Any = None  # the schema of typed events a missing table is created from
        if self._table is not None:
            self._check_table()

    # -- ids and the log -------------------------------------------------------------------

    def app_id(self, partition_id: str) -> str:
        """The application transaction id of a partition's checkpoint."""
        return "eventhubs/" + "/".join((*self.stream.key, str(partition_id)))

    def dedupe_app_id(self, partition_id: str, group: str) -> str:
        return f"{self.app_id(partition_id)}/dedupe/{group}"

    def txn_version(self, app_id: str) -> int | None:
        """The version of application transaction ``app_id`` in the log as last read (``None``: none yet)."""
        if self._table is None:
            return None
        version = self._table.transaction_version(app_id)
        return None if version is None else int(version)

    def checkpoint_of(self, partition_id: str) -> int:
        """The partition's last sequence number committed, as the log was last read (``-1``: none)."""
        version = self.txn_version(self.app_id(partition_id))
        return NO_CHECKPOINT if version is None else version

    def refresh(self) -> None:
        """Read the log up to its newest commit (a table another writer created is found)."""
        if self._table is None:
            self._table = open_table(self.target.uri, self.target.storage_options)
            if self._table is not None:
                self._check_table()
        else:
            self._table.update_incremental()
            self._schema = None

    def _check_table(self) -> None:
        wanted = list(self.target.partition_by or [])
        actual = list(self._table.metadata().partition_columns)
        if wanted and wanted != actual:
            raise SinkConfigError(
                f"partition_by {wanted} does not match the partition columns {actual} of the existing Delta table "
                f"{self.target.uri!r}; pass {actual}, or write to a new table."
            )

    def prepare_columns(self, fields: Mapping[str, FieldType]) -> None:
        """Create a missing table from ``fields`` (at the batch's commit; a column already planned keeps its type), or
        add the columns the table lacks."""
        if self._table is None:
            planned, fresh = self._new_schema, arrow_schema(fields)
            for column in fresh if planned is not None else ():
                if column.name not in planned.names:
                    planned = planned.append(column)
            self._new_schema = fresh if planned is None else planned
        elif prepare_table(self._table, self.target.uri, fields, evolve=self.target.evolve_columns):
            self._table.update_incremental()
            self._schema = None

    def arrow_rows(self, rows: Sequence[Mapping[str, Any]]) -> Any:
        """``rows`` as an Arrow table of the table's schema (of the typed events' schema, or inferred, when there is
        no table yet); :class:`DataError` or :class:`ValueRefusedError` for a row it cannot hold."""
        import pyarrow as pa

        if self._table is not None and self._schema is None:
            self._schema = pa.schema(self._table.schema().to_arrow())
        schema = self._schema if self._table is not None else self._new_schema
        if self._table is not None:
            names = set(schema.names)
            for row in rows:
                unknown = [c for c in row if c not in names]
                if unknown:
                    raise DataError(f"columns {unknown} are not in the Delta table {self.target.uri!r}")
        try:
            return to_arrow(rows, schema, extend=self._table is None)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            if isinstance(exc, ValueRefusedError):
                raise
            raise DataError(f"a value does not fit the Delta table's schema: {exc}") from None

    # -- what the run calls ----------------------------------------------------------------

    def checkpoints(self, partition_ids: Iterable[str]) -> dict[str, PartitionCheckpoint]:
        """Each partition's checkpoint as the table's log holds it (``-1`` where none was committed)."""
        self.refresh()
        result = {}
        for p in (str(p) for p in partition_ids):
            seq = self.checkpoint_of(p)
            offset = self._offset(p, seq) if seq != NO_CHECKPOINT else None
            result[p] = PartitionCheckpoint(p, seq, offset, None, None)
        return result

    def _offset(self, partition_id: str, sequence_number: int) -> str | None:
        """The offset of the partition's checkpoint: from this process's commits, else from the log's commit info."""
        known = self.counts.offsets.get(partition_id)
        if known is not None and known[0] == sequence_number:
            return known[1]
        offset = None  # also remembered when not found: the history is read once per partition and checkpoint
        for commit in self._table.history(_OFFSET_HISTORY):
            if commit.get(META_PARTITION) == partition_id and str(commit.get(META_SEQUENCE)) == str(sequence_number):
                offset = commit.get(META_OFFSET) or None
                break
        self.counts.offsets[partition_id] = (sequence_number, offset)
        return offset

    @contextmanager
    def transaction(self) -> Iterator[DeltaTransaction]:
        """One batch: what the block buffers is committed when it ends (nothing is written when it raises)."""
        self.refresh()
        tx = DeltaTransaction(self)
        yield tx
        self._commit(tx)

    def close(self) -> None:
        self._table = None

    # -- the commit ------------------------------------------------------------------------

    def _commit(self, tx: DeltaTransaction) -> None:
        if tx.partition_id is None or tx.version is None:
            raise SinkConfigError("a Delta batch must advance its partition's checkpoint before it commits")
        from deltalake import CommitProperties, Transaction
        from deltalake.exceptions import DeltaError

        if tx.dead_letters:
            self._commit_dead_letters(tx.partition_id, tx.version, tx.dead_letters)
        transactions = [Transaction(self.app_id(tx.partition_id), tx.version)]
        transactions += [Transaction(self.dedupe_app_id(tx.partition_id, g), m) for g, m in sorted(tx.marks_to_save.items())]
        properties = CommitProperties(
            app_transactions=transactions,
            custom_metadata={META_PARTITION: tx.partition_id, META_SEQUENCE: str(tx.version), META_OFFSET: tx.offset or ""},
        )
        try:
            self.write(tx.rows, tx.tables, properties,
                       f"the first batch of partition {tx.partition_id} (up to seq {tx.version})")
        except DeltaError as exc:  # a concurrent transaction, a commit file of that version already there, ...
            self._lost(tx, exc)
            raise
        self.counts.commits += 1
        self.counts.offsets[tx.partition_id] = (tx.version, tx.offset)

    def write(self, rows: Sequence[Mapping[str, Any]], tables: Sequence[Any], properties: Any, first: str) -> None:
        """
        One commit of ``rows`` (``tables``: the same rows as :meth:`arrow_rows` converted them) with ``properties``
        (its application transactions): appended, or merged on the keys; the table is created when missing.

        :param first: what the commit is, for the error when there is no table and nothing to create it from.
        """
        from deltalake import write_deltalake

        if self.target.mode == MERGE and rows:
            rows = _last_per_key(rows, self.target.merge_keys or ())
        if self._table is None:
            if not rows:
                raise SinkConfigError(
                    f"The Delta table {self.target.uri!r} does not exist and {first} has no rows to take its columns "
                    "from; create the table first (write_deltalake with an empty table of its schema)."
                )
            write_deltalake(self.target.uri, self.arrow_rows(rows), mode="append",
                            partition_by=list(self.target.partition_by or []) or None,
                            storage_options=self.target.storage_options, commit_properties=properties,
                            target_file_size=self.target.target_file_size)
        elif self.target.mode == MERGE and rows:
            predicate = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in self.target.merge_keys or ())
            (self._table.merge(self.arrow_rows(rows), predicate, source_alias="s", target_alias="t",
                               commit_properties=properties)
             .when_matched_update_all().when_not_matched_insert_all().execute())
        else:
            import pyarrow as pa

            # converted once, by insert_rows, to the existing table's schema
            data = pa.concat_tables(tables) if tables else self.arrow_rows([])
            write_deltalake(self._table, data, mode="append", storage_options=self.target.storage_options,
                            commit_properties=properties, target_file_size=self.target.target_file_size)

    def _lost(self, tx: DeltaTransaction, exc: BaseException) -> None:
        """After a refused commit: raise :class:`PartitionTakenOverError` when another writer moved the checkpoint
        (the log read again); return, for ``exc`` to be raised, when it did not or the log cannot be read."""
        try:
            self._table = open_table(self.target.uri, self.target.storage_options)
        except Exception:
            log.warning("The Delta table %r could not be read again after a refused commit", self.target.uri, exc_info=True)
            return
        current = self.checkpoint_of(tx.partition_id or "")
        if current != tx.expected:
            self.counts.taken_over += 1
            raise PartitionTakenOverError(
                f"Partition {tx.partition_id!r} of {'/'.join(self.stream.key)}: another instance committed it up to "
                f"sequence number {current} in the Delta table {self.target.uri!r} while this batch (up to "
                f"{tx.version}) was written; this batch was not committed ({type(exc).__name__}), the partition is "
                "left to that instance."
            ) from exc

    def _commit_dead_letters(self, partition_id: str, version: int, letters: list[dict[str, Any]]) -> None:
        """Write the batch's dead letters after the dead-letter table's own checkpoint of the partition."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        uri = self.target.dead_letter_uri or dead_letter_uri(self.target.uri)
        table = open_table(uri, self.target.storage_options)
        app_id = self.app_id(partition_id)
        done = table.transaction_version(app_id) if table is not None else None
        fresh = [d for d in letters if done is None or d["sequence_number"] > done]
        if not fresh:
            return
        write_deltalake(table if table is not None else uri, pa.Table.from_pylist(fresh, schema=dead_letter_schema()),
                        mode="append", storage_options=self.target.storage_options,
                        commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]))
        self.counts.dead_letter_commits += 1

    def dead_letters(self) -> list[dict[str, Any]]:
        """The dead-letter table's rows of this stream (empty when it has none)."""
        table = open_table(self.target.dead_letter_uri or "", self.target.storage_options)
        if table is None:
            return []
        namespace, eventhub, group = self.stream.key
        rows = table.to_pyarrow_table().to_pylist()
        return sorted((r for r in rows if (r["namespace"], r["eventhub"], r["consumer_group"]) == (namespace, eventhub, group)),
                      key=lambda r: (r["partition_id"], r["sequence_number"]))


def _quote(column: str) -> str:
    if not isinstance(column, str) or not column or '"' in column:
        raise SinkConfigError(f"merge key {column!r} must be a column name")
    return f'"{column}"'


def _last_per_key(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> list[Mapping[str, Any]]:
    """The last row of each key, in first-seen order (a merge refuses two source rows for one target row)."""
    by_key: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for row in rows:
        try:
            key = tuple(row[k] for k in keys)
        except KeyError as exc:
            raise SinkConfigError(f"merge key {exc.args[0]!r} is missing from a row the row function returned") from None
        by_key[key] = row
    return list(by_key.values())
