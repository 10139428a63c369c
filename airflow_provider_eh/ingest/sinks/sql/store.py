"""The SQL sink: one connection, the state tables, and what one batch transaction does.

:class:`SqlIngestStore` takes any DB-API connection (Airflow's ``DbApiHook.get_conn()`` gives one)
and is the only code that writes the state tables of :mod:`airflow_provider_eh.ingest.sinks.sql.tables`.
A :class:`Transaction` is opened per batch; everything it writes (user rows, dead letters,
deferred events, sessions, dedupe marks and the checkpoint) commits or rolls back together. Both
satisfy :mod:`~airflow_provider_eh.ingest.sinks.contract` in full, sessions and replays included.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from airflow_provider_eh.client.schema_types import FieldType
from airflow_provider_eh.errors import DeadLetterNotFoundError, PartitionTakenOverError
from airflow_provider_eh.ingest.events import IngestEvent
from airflow_provider_eh.ingest.sinks.contract import NO_CHECKPOINT, PartitionCheckpoint, Stream, utc_now
from airflow_provider_eh.ingest.sinks.sql.columns import json_fields
from airflow_provider_eh.ingest.sinks.sql.dialects import Dialect
from airflow_provider_eh.ingest.sinks.sql.events import (
    EVENT_COLUMNS,
    EVENT_SELECT,
    STREAM_COLUMNS,
    DeadLetter,
    event_columns,
    event_from_row,
)
from airflow_provider_eh.ingest.sinks.sql.shape import prepare, verify_target
from airflow_provider_eh.ingest.sinks.sql.tables import DEFAULT_PREFIX, ddl, identifier
from airflow_provider_eh.ingest.sinks.sql.values import bind_rows, data_errors


class Transaction:
    """
    The statements of one batch; use :meth:`SqlIngestStore.transaction`.

    Where the dialect :attr:`~airflow_provider_eh.ingest.sinks.sql.dialects.Dialect.chains` statements, those whose
    result nobody reads (savepoints, their release, the dedupe marks) wait and go to the server with
    the next statement, in one call: each call that waits on the server hands the interpreter lock to
    the receiving thread and then waits to win it back, so a batch costs its calls more than its statements.
    """

    def __init__(self, store: SqlIngestStore, cursor: Any):
        self._store = store
        self._cur = cursor
        self._p = store.prefix
        self._k = store.stream.key
        self.savepoints = 0
        self._waiting: list[bytes] = []  # rendered statements that go with the next one
        self._json: dict[str, frozenset[str]] = {}  # the JSON columns by table, of the batch's schemas
        self._calls = 0  # calls that sent (or began to send) statements to the server so far

    def _exec(self, statement: str, params: Sequence[Any] = ()) -> Any:
        dialect = self._store.dialect
        if self._waiting:
            rendered = dialect.render(self._cur, dialect.sql(statement), params)  # what fails here sends nothing
            self._calls += 1
            self._cur.execute(self._take_waiting() + rendered)
        else:
            self._calls += 1
            self._cur.execute(dialect.sql(statement), tuple(params))
        return self._cur

    execute = _exec

    @property
    def dialect(self) -> Dialect:
        return self._store.dialect

    def _later(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Run ``statement``, whose result nobody reads, with the next one where the dialect chains statements; else now."""
        dialect = self._store.dialect
        if dialect.chains:
            self._waiting.append(dialect.render(self._cur, dialect.sql(statement), params))
        else:
            self._exec(statement, params)

    def _take_waiting(self) -> bytes:
        """The waiting statements as the prefix of the next call (``"a; b; "``); they count as sent from now on."""
        waiting, self._waiting = self._waiting, []
        return b"".join(statement + b"; " for statement in waiting)

    def flush(self) -> None:
        """Send the statements still waiting (the store does before it commits)."""
        if self._waiting:
            self._calls += 1
            self._cur.execute(self._take_waiting())

    def _many(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.flush()
            self._calls += 1
            self._store.dialect.executemany(self._cur, self._store.dialect.sql(statement), [tuple(r) for r in rows])

    _STREAM = "namespace = ? AND eventhub = ? AND consumer_group = ?"

    def is_driver_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` was raised by the database driver (not by user code)."""
        return type(exc).__module__.split(".")[0] == type(self._store.conn).__module__.split(".")[0]

    def is_data_error(self, exc: BaseException) -> bool:
        """Whether the database refused a row for its content: the driver's ``IntegrityError`` or ``DataError``
        (DB-API 2.0 names both at the top of the driver's module), or a value no column type holds."""
        return isinstance(exc, self._store.data_errors)

    checks_every_schema = True  # a field two schemas of a batch type differently is checked against its column for both

    def prepare_columns(self, table: str, fields: Mapping[str, FieldType]) -> None:
        """Create ``table`` from the schema's ``fields``, or add the columns it lacks (:mod:`.shape`)."""
        prepare(self, table, fields, self._store.columns, evolve=self._store.evolve_columns)
        self._store.json_columns[table] = self._json[table] = self._json.get(table, frozenset()) | json_fields(fields)

    # -- checkpoint -------------------------------------------------------------------------

    def checkpoint(self, partition_id: str) -> PartitionCheckpoint:
        return self._store._read_checkpoint(self._cur, partition_id)

    def advance_checkpoint(
        self, partition_id: str, expected: int, sequence_number: int, offset: str | None, owner_id: str
    ) -> None:
        """Move the checkpoint from ``expected`` to ``sequence_number``; raise if another instance moved it."""
        now = utc_now()
        if expected == NO_CHECKPOINT:
            self._exec(
                self._store.dialect.insert_ignore(
                    f"{self._p}checkpoint",
                    (*STREAM_COLUMNS, "partition_id", "sequence_number", "event_offset", "owner_id", "updated_at"),
                    (*STREAM_COLUMNS, "partition_id"),
                ),
                (*self._k, partition_id, sequence_number, offset, owner_id, now),
            )
        else:
            self._exec(
                f"UPDATE {self._p}checkpoint SET sequence_number = ?, event_offset = ?, owner_id = ?, updated_at = ? "
                f"WHERE {self._STREAM} AND partition_id = ? AND sequence_number = ?",
                (sequence_number, offset, owner_id, now, *self._k, partition_id, expected),
            )
        if self._cur.rowcount != 1:
            current = self.checkpoint(partition_id)
            raise PartitionTakenOverError(
                f"Partition {partition_id!r} of {'/'.join(self._k)}: the SQL checkpoint is at sequence number "
                f"{current.sequence_number} (committed by {current.owner_id!r}), not {expected} as read before this "
                "batch; another instance processed it. This batch was rolled back; the partition is left to that instance."
            )

    # -- dedupe ------------------------------------------------------------------------------

    def marks(self, partition_id: str, groups: Iterable[str]) -> dict[str, int]:
        groups = sorted(set(groups))
        if not groups:
            return {}
        marks = ", ".join("?" for _ in groups)
        rows = self._exec(
            f"SELECT producer_group, high_water_mark FROM {self._p}dedupe WHERE {self._STREAM} AND partition_id = ? "
            f"AND producer_group IN ({marks})",
            (*self._k, partition_id, *groups),
        ).fetchall()
        return {str(g): int(m) for g, m in rows}

    def save_marks(self, partition_id: str, marks: Mapping[str, int]) -> None:
        """Move the high-water marks up (sent with the next statement where the dialect chains statements)."""
        now = utc_now()
        statement = self._store.dialect.upsert(
            f"{self._p}dedupe",
            (*STREAM_COLUMNS, "producer_group", "partition_id", "high_water_mark", "updated_at"),
            (*STREAM_COLUMNS, "producer_group", "partition_id"),
            {"high_water_mark": "{new}", "updated_at": "{new}"},
        )
        rows = [(*self._k, group, partition_id, mark, now) for group, mark in sorted(marks.items())]
        if self._store.dialect.chains:
            for row in rows:
                self._later(statement, row)
        else:
            self._many(statement, rows)

    # -- sessions ----------------------------------------------------------------------------

    def session(self, session_key: str) -> tuple[int, bool] | None:
        row = self._exec(
            f"SELECT next_sequence, completed FROM {self._p}session WHERE {self._STREAM} AND session_key = ?",
            (*self._k, session_key),
        ).fetchone()
        return None if row is None else (int(row[0]), bool(row[1]))

    def save_session(self, session_key: str, next_sequence: int, completed: bool) -> None:
        self._exec(
            self._store.dialect.upsert(
                f"{self._p}session",
                (*STREAM_COLUMNS, "session_key", "next_sequence", "completed", "updated_at"),
                (*STREAM_COLUMNS, "session_key"),
                {"next_sequence": "{new}", "completed": "{new}", "updated_at": "{new}"},
            ),
            (*self._k, session_key, next_sequence, int(completed), utc_now()),
        )

    def defer(self, session_key: str, session_sequence: int, event: IngestEvent) -> bool:
        """Keep ``event`` until its predecessors are applied; ``False`` if that position is already held."""
        self._exec(
            self._store.dialect.insert_ignore(
                f"{self._p}deferred",
                (*STREAM_COLUMNS, "session_key", "session_sequence", *EVENT_COLUMNS, "deferred_at"),
                (*STREAM_COLUMNS, "session_key", "session_sequence"),
            ),
            (*self._k, session_key, session_sequence, *event_columns(event), utc_now()),
        )
        return self._cur.rowcount == 1

    def take_deferred(self, session_key: str, session_sequence: int) -> IngestEvent | None:
        """Remove and return the deferred event at ``session_sequence`` of the session, if any."""
        where = f"WHERE {self._STREAM} AND session_key = ? AND session_sequence = ?"
        params = (*self._k, session_key, session_sequence)
        row = self._exec(f"SELECT {EVENT_SELECT} FROM {self._p}deferred {where}", params).fetchone()
        if row is None:
            return None
        self._exec(f"DELETE FROM {self._p}deferred {where}", params)
        return event_from_row(row)

    def take_expired_deferred(self, enqueued_before: str) -> list[tuple[str, int, IngestEvent]]:
        """Remove and return deferred events enqueued before ``enqueued_before`` (ISO 8601 UTC)."""
        rows = self._exec(
            f"SELECT session_key, session_sequence, {EVENT_SELECT} FROM {self._p}deferred WHERE {self._STREAM} "
            "AND enqueued_time < ? ORDER BY session_key, session_sequence",
            (*self._k, enqueued_before),
        ).fetchall()
        self._many(
            f"DELETE FROM {self._p}deferred WHERE {self._STREAM} AND session_key = ? AND session_sequence = ?",
            [(*self._k, r[0], r[1]) for r in rows],
        )
        return [(str(r[0]), int(r[1]), event_from_row(r[2:])) for r in rows]

    def pending_in_session(self, session_key: str) -> list[int]:
        rows = self._exec(
            f"SELECT session_sequence FROM {self._p}deferred WHERE {self._STREAM} AND session_key = ? "
            "ORDER BY session_sequence",
            (*self._k, session_key),
        ).fetchall()
        return [int(r[0]) for r in rows]

    # -- rows and dead letters --------------------------------------------------------------

    def insert_rows(self, table: str, rows: Sequence[Mapping[str, Any]], *, alone: bool = False) -> None:
        """
        Insert ``rows`` into ``table``, one bulk write per distinct column set.

        :param alone: if the database refuses a row, none of ``rows`` stays and the transaction goes
            on (the caller may then insert them in parts): under a savepoint, or without one where the
            database undoes a failed statement by itself and the rows go as one statement.
        """
        identifier(table, "table")
        by_columns: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for row in rows:
            columns = tuple(row)
            group = by_columns.get(columns)
            if group is None:
                group = by_columns[columns] = []
            # a dict's values are in its keys' order: no per-column lookup for the common case
            group.append(tuple(row.values()) if type(row) is dict else tuple(row[c] for c in columns))
        dialect = self._store.dialect
        writes = []
        for columns, values in by_columns.items():
            names = [identifier(c, f"column of table {table!r}") for c in columns]
            values = bind_rows(dialect.kind, names, values, self._store.json_columns.get(table, frozenset()))  # type: ignore[assignment]
            names = [dialect.quote(c) for c in names]
            writes.append((names, values, dialect.insert_statements(self._cur, table, names, values)))
        if alone and dialect.statement_atomic and len(writes) == 1 and len(writes[0][2] or ()) == 1:
            self._write_rows(table, writes)  # one statement: undone alone by the database itself
        elif alone and writes:
            with self.savepoint():
                self._write_rows(table, writes)
        else:
            self._write_rows(table, writes)

    def _write_rows(self, table: str, writes: Sequence[tuple[list[str], list[tuple[Any, ...]], list[str] | None]]) -> None:
        for names, values, statements in writes:
            if statements is None:
                self._calls += 1
                self._store.dialect.insert_rows(self._cur, table, names, values, self._take_waiting())
                continue
            self.flush()
            for statement in statements:
                self._calls += 1
                self._cur.execute(statement)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested scope that is undone alone if its block raises."""
        self.savepoints += 1
        name = f"eh_sp_{self.savepoints}"
        calls, waiting = self._calls, len(self._waiting)
        self._later(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            if self._calls == calls:  # the savepoint is still waiting: nothing of the block reached the server
                del self._waiting[waiting:]
            else:
                self._waiting.clear()  # what the block left waiting is undone with it
                self._exec(f"ROLLBACK TO SAVEPOINT {name}")
                self._later(f"RELEASE SAVEPOINT {name}")
            raise
        self._later(f"RELEASE SAVEPOINT {name}")

    def dead_letter(self, event: IngestEvent, reason: str, error: str) -> None:
        self._exec(
            self._store.dialect.upsert(
                f"{self._p}dead_letter",
                (*STREAM_COLUMNS, *EVENT_COLUMNS, "reason", "error", "failed_at", "status", "attempts"),
                (*STREAM_COLUMNS, "partition_id", "sequence_number"),
                {"reason": "{new}", "error": "{new}", "failed_at": "{new}", "status": "'dead'", "attempts": "{old} + 1"},
            ),
            (*self._k, *event_columns(event), reason, error[:4000], utc_now(), "dead", 1),
        )

    def mark_replayed(self, event: IngestEvent) -> None:
        self._exec(
            f"UPDATE {self._p}dead_letter SET status = 'replayed', replayed_at = ? "
            f"WHERE {self._STREAM} AND partition_id = ? AND sequence_number = ?",
            (utc_now(), *self._k, event.partition_id, event.sequence_number),
        )


class SqlIngestStore:
    """
    The state tables of one stream on one DB-API connection: the SQL sink.

    :param conn: an open DB-API connection (``DbApiHook.get_conn()``); the store owns it from now on.
    :param stream: the hub and consumer group the state belongs to.
    :param prefix: prefix of the state tables.
    :param create_tables: create the state tables when missing.
    :param evolve_columns: add a column to the target table for a field a typed event's schema gains (a table that
        does not exist is created from the schema either way).
    """

    keeps_sessions: ClassVar[bool] = True

    def __init__(self, conn: Any, stream: Stream, *, prefix: str = DEFAULT_PREFIX, create_tables: bool = True,
                 evolve_columns: bool = True):
        self.conn = conn
        self.evolve_columns = evolve_columns
        self.columns: dict[str, dict[str, str]] = {}  # the target tables' columns as read, lower-cased: declared types
        self.json_columns: dict[str, frozenset[str]] = {}  # the columns of JSON kinds, by the typed events' schemas
        self.stream = stream
        self.prefix = identifier(prefix + "x", "table prefix")[:-1]
        self.dialect = Dialect.of(conn)  # refuses an unsupported database before anything is read
        self.data_errors = data_errors(conn)
        self.dialect.prepare(conn)
        if create_tables:
            self.create_tables()

    def create_tables(self) -> None:
        with self.transaction():
            cur = self.conn.cursor()
            for statement in ddl(self.prefix, self.dialect):
                cur.execute(statement)

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        self.dialect.begin(self.conn)
        try:
            tx = Transaction(self, self.conn.cursor())
            yield tx
            tx.flush()
        except BaseException:
            self.columns.clear()  # a table created or altered in the transaction may be undone with it
            self.dialect.rollback(self.conn)
            raise
        self.dialect.commit(self.conn)

    def close(self) -> None:
        self.conn.close()

    def _read_checkpoint(self, cur: Any, partition_id: str) -> PartitionCheckpoint:
        cur.execute(
            self.dialect.sql(
                f"SELECT sequence_number, event_offset, owner_id, updated_at FROM {self.prefix}checkpoint "
                f"WHERE {Transaction._STREAM} AND partition_id = ?"
            ),
            (*self.stream.key, str(partition_id)),
        )
        row = cur.fetchone()
        if row is None:
            return PartitionCheckpoint(str(partition_id), NO_CHECKPOINT, None, None, None)
        return PartitionCheckpoint(str(partition_id), int(row[0]), row[1], row[2], row[3])

    def checkpoints(self, partition_ids: Iterable[str]) -> dict[str, PartitionCheckpoint]:
        """The SQL checkpoints of ``partition_ids`` (``-1`` where none was committed)."""
        cur = self.conn.cursor()
        result = {str(p): self._read_checkpoint(cur, str(p)) for p in partition_ids}
        self.dialect.end_read(self.conn)  # end the read-only transaction a driver may have opened
        return result

    def _select(self, statement: str, params: Sequence[Any]) -> list[Any]:
        cur = self.conn.cursor()
        cur.execute(self.dialect.sql(statement), tuple(params))
        rows = cur.fetchall()
        self.dialect.end_read(self.conn)
        return rows

    def dead_letters(
        self, *, status: str | None = "dead", partition_id: str | None = None, sequence_numbers: Iterable[int] | None = None
    ) -> list[DeadLetter]:
        """Dead letters of the stream, oldest partition position first."""
        where, params = [Transaction._STREAM], list(self.stream.key)
        if status:
            where.append("status = ?")
            params.append(status)
        if partition_id is not None:
            where.append("partition_id = ?")
            params.append(str(partition_id))
        wanted = None if sequence_numbers is None else {int(s) for s in sequence_numbers}
        rows = self._select(
            f"SELECT {EVENT_SELECT}, reason, error, failed_at, status, attempts FROM {self.prefix}dead_letter "
            f"WHERE {' AND '.join(where)} ORDER BY partition_id, sequence_number",
            params,
        )
        letters = [DeadLetter(event_from_row(r[:6]), r[6], r[7], r[8], r[9], int(r[10])) for r in rows]
        if wanted is not None:
            missing = wanted - {d.event.sequence_number for d in letters}
            if missing:
                raise DeadLetterNotFoundError(
                    f"No {status or ''} dead letter at sequence number(s) {sorted(missing)} of partition "
                    f"{partition_id!r} in {'/'.join(self.stream.key)}; list them with `python -m "
                    "airflow_provider_eh.ingest list`."
                )
            letters = [d for d in letters if d.event.sequence_number in wanted]
        return letters

    def sessions(self) -> dict[str, dict[str, Any]]:
        """Every session's state: ``{key: {next_sequence, completed, deferred: [session sequences]}}``."""
        states: dict[str, dict[str, Any]] = {
            str(k): {"next_sequence": int(n), "completed": bool(c), "deferred": []}
            for k, n, c in self._select(
                f"SELECT session_key, next_sequence, completed FROM {self.prefix}session WHERE {Transaction._STREAM}",
                self.stream.key,
            )
        }
        for key, seq in self._select(
            f"SELECT session_key, session_sequence FROM {self.prefix}deferred WHERE {Transaction._STREAM} "
            "ORDER BY session_key, session_sequence",
            self.stream.key,
        ):
            states.setdefault(str(key), {"next_sequence": None, "completed": False, "deferred": []})["deferred"].append(int(seq))
        return states

    def verify_table(self, table: str) -> None:
        """Fail early, naming the table, when the target table cannot be read (:func:`.shape.verify_target`)."""
        verify_target(self, table)
