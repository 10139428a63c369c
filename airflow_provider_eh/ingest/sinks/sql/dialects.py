"""The dialects of the databases the SQL sink supports (SQLite, Postgres, MySQL/MariaDB).

Every table is keyed by the stream ``(namespace, eventhub, consumer_group)``, so one database can
hold the state of many hubs and consumer groups. The statements are plain SQL; what differs between
the supported databases (the upsert spelling, the parameter marker, the type of key columns, how a
transaction is opened) is in one :class:`Dialect` subclass each, and any other connection is refused
by :meth:`Dialect.of` before an event is read.
The state tables themselves are :mod:`~airflow_provider_eh.ingest.sinks.sql.tables`.
"""

from __future__ import annotations

import datetime
import decimal
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_eh.errors import SinkConfigError

# Why dialect classes of our own rather than SQLAlchemy Core: the state writes are a dozen fixed
# statements whose only differences are the upsert spelling, the parameter marker, the key column
# type and how a transaction starts; the hot path is one bulk write per table per batch on the raw
# DB-API cursor (multi-row ``VALUES``, or ``COPY``), which SQLAlchemy would wrap in per-statement
# compilation and result objects for nothing. A plain DB-API connection (what
# ``DbApiHook.get_conn()`` returns, or ``sqlite3.connect``) is all a dialect needs, and the
# supported list stays explicit.


class Dialect:
    """
    How to talk to one database through its DB-API driver.

    Subclasses exist for the supported databases only (:data:`SUPPORTED`); :meth:`of` refuses any
    other connection before anything is read from the hub.

    :param name: the database, as shown in messages.
    :param driver: the driver's module name.
    :param paramstyle: the driver's ``paramstyle``; statements are written with ``?`` and rewritten.
    """

    name = "?"
    kind = "?"  # the database as the column types (.columns) and value forms (.values) name it
    key_type = "TEXT"  # type of text columns that are part of a primary key

    def __init__(self, driver: str, paramstyle: str):
        self.driver = driver
        self.paramstyle = paramstyle

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.driver!r}, {self.paramstyle!r})"

    def quote(self, column: str) -> str:
        """A checked plain column name as statements write it (MySQL quotes it: a field may be a reserved word)."""
        return f"`{column}`" if self.kind == "mysql" else column

    @classmethod
    def of(cls, conn: Any) -> Dialect:
        """The dialect of a DB-API connection; :class:`SinkConfigError` for an unsupported one."""
        module = type(conn).__module__.split(".")[0]
        for dialect, drivers in SUPPORTED.items():
            if module in drivers:
                import sys

                driver = sys.modules.get(module)
                style = "qmark" if dialect is SqliteDialect else getattr(driver, "paramstyle", "format")
                return dialect(module, style)
        raise SinkConfigError(
            f"SQL connection of type {type(conn).__module__}.{type(conn).__name__} (driver {module!r}) is not "
            f"supported for ingestion; supported: {supported_text()}. Use a connection to one of those."
        )

    @property
    def is_sqlite(self) -> bool:
        return False

    @property
    def chains(self) -> bool:
        """
        Whether statements can go to the server together, in one call (``"a; b"``): a
        :class:`~airflow_provider_eh.ingest.sinks.sql.store.Transaction` then sends those whose result nobody
        reads with the next one.
        """
        return False

    @property
    def statement_atomic(self) -> bool:
        """Whether the database undoes a failed statement alone and the transaction goes on (no savepoint needed around one)."""
        return False

    def render(self, cursor: Any, statement: str, params: Sequence[Any]) -> bytes:
        """``statement`` (rewritten by :meth:`sql`) with ``params`` bound as the driver sends it; dialects that :attr:`chains`."""
        raise NotImplementedError(f"{self!r} does not send statements together")

    def sql(self, statement: str) -> str:
        """``statement`` with ``?`` markers rewritten for the driver."""
        if self.paramstyle == "qmark":
            return statement
        if self.paramstyle in ("format", "pyformat"):
            return statement.replace("%", "%%").replace("?", "%s")
        raise SinkConfigError(f"DB-API paramstyle {self.paramstyle!r} of driver {self.driver!r} is not supported")

    # -- statements ------------------------------------------------------------------------

    def insert_ignore(self, table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
        """Insert one row unless its key exists (rowcount 1 when inserted, 0 when not)."""
        marks = ", ".join("?" for _ in columns)
        return (
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
            f"ON CONFLICT ({', '.join(keys)}) DO NOTHING"
        )

    def upsert(self, table: str, columns: Sequence[str], keys: Sequence[str], updates: Mapping[str, str]) -> str:
        """
        Insert, or on a key conflict update: ``updates`` maps a column to an expression in which
        ``{new}`` is the value the insert proposed for that column and ``{old}`` the stored one.
        """
        marks = ", ".join("?" for _ in columns)
        sets = ", ".join(f"{c} = " + e.format(new=f"excluded.{c}", old=f"{table}.{c}") for c, e in updates.items())
        return (
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
            f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {sets}"
        )

    def executemany(self, cursor: Any, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run ``statement`` (already rewritten by :meth:`sql`) for every row, as few round trips as the driver allows."""
        cursor.executemany(statement, rows)

    def insert_statements(
        self, cursor: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> list[str] | None:
        """
        The statements that insert ``rows``, their values written in by the package as the driver
        writes them, for dialects that do so; ``None``: :meth:`insert_rows` hands the rows to the driver.
        """
        return None

    def insert_rows(self, cursor: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                    before: bytes = b"") -> None:
        """
        Insert ``rows`` (values in ``columns`` order) into ``table``; identifiers are checked by the caller.

        :param before: statements to run first (``"a; b; "``, rendered), in the same call where the dialect :attr:`chains`.
        """
        if before:
            cursor.execute(before)
        marks = ", ".join("?" for _ in columns)
        self.executemany(cursor, self.sql(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"), rows)

    # -- transactions ----------------------------------------------------------------------

    def prepare(self, conn: Any) -> None:
        """Put a fresh connection in the mode the store expects."""

    def begin(self, conn: Any) -> None:
        """DB-API drivers open a transaction implicitly at the first statement."""

    def commit(self, conn: Any) -> None:
        conn.commit()

    def rollback(self, conn: Any) -> None:
        conn.rollback()

    def end_read(self, conn: Any) -> None:
        """End the transaction a driver opened for a read."""
        conn.rollback()


def split_values(statement: str, marker: str) -> tuple[str, str, str] | None:
    """
    ``INSERT ... VALUES (m, m, ...) rest`` as ``(head, "(m, m, ...)", rest)``, ``None`` for any other
    statement: the parts a multi-row ``VALUES`` is built from.
    """
    found = re.search(r"VALUES \((?:" + re.escape(marker) + r", )*" + re.escape(marker) + r"\)", statement)
    if found is None:
        return None
    return statement[: found.start()] + "VALUES ", found.group(0)[len("VALUES ") :], statement[found.end() :]


class SqliteDialect(Dialect):
    """SQLite through ``sqlite3``: the package issues ``BEGIN IMMEDIATE`` itself; many rows go as multi-row inserts."""

    name = "SQLite"
    kind = "sqlite"

    # Rows per multi-row statement at most (SQLite's bound-variable limit caps it further).
    ROWS_PER_STATEMENT = 500

    @property
    def is_sqlite(self) -> bool:
        return True

    def prepare(self, conn: Any) -> None:
        conn.isolation_level = None  # we issue BEGIN IMMEDIATE / COMMIT ourselves
        conn.execute("PRAGMA busy_timeout = 60000")

    def executemany(self, cursor: Any, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """
        ``INSERT ... VALUES`` as multi-row statements of up to :attr:`ROWS_PER_STATEMENT` rows.

        The ``sqlite3`` module releases the interpreter lock around each row's step of an
        ``executemany`` and must win it back for the next row; with the receiving threads busy, each
        of those hand-overs waits for a thread switch (milliseconds), so a batch of a few thousand
        rows spent seconds waiting. One statement per few hundred rows hands over a few times per
        batch. Rows are applied in order, as ``executemany`` applies them (``ON CONFLICT`` included).
        """
        parts = split_values(statement, "?") if len(rows) > 1 else None
        if parts is None:
            cursor.executemany(statement, rows)
            return
        head, template, rest = parts
        width = max(1, len(rows[0]))
        try:
            import sqlite3

            variables = cursor.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        except AttributeError:  # Python < 3.11: SQLite's historic default
            variables = 999
        per = max(1, min(self.ROWS_PER_STATEMENT, variables // width))
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            cursor.execute(head + ", ".join([template] * len(chunk)) + rest, [v for row in chunk for v in row])

    def begin(self, conn: Any) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def commit(self, conn: Any) -> None:
        conn.execute("COMMIT")

    def rollback(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def end_read(self, conn: Any) -> None:
        """Autocommit mode: a read opened no transaction."""


class PostgresDialect(Dialect):
    """
    Postgres through psycopg2 or psycopg; with psycopg2, many rows go as one ``COPY`` or ``execute_values``,
    and statements whose result nobody reads go with the next one.
    """

    name = "Postgres"
    kind = "postgres"

    @property
    def chains(self) -> bool:
        """psycopg2 binds parameters itself and sends ``"a; b"`` as one query; psycopg (3) binds them on the server."""
        return self.driver == "psycopg2"

    def render(self, cursor: Any, statement: str, params: Sequence[Any]) -> bytes:
        return cursor.mogrify(statement, tuple(params))

    def executemany(self, cursor: Any, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """
        psycopg2's ``executemany`` runs one statement per row (a round trip each); its
        ``execute_values`` sends the rows as one multi-row ``VALUES`` per 1000 rows, the same
        statement otherwise (``ON CONFLICT`` included): the state tables' upserts go this way.
        """
        if self.driver == "psycopg2" and len(rows) > 1:
            parts = split_values(statement, "%s")
            if parts is not None:
                from psycopg2.extras import execute_values

                head, template, rest = parts
                execute_values(cursor, head + "%s" + rest, rows, template=template, page_size=1000)
                return
        cursor.executemany(statement, rows)

    def insert_rows(self, cursor: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
                    before: bytes = b"") -> None:
        """
        A batch's rows through ``COPY ... FROM STDIN`` (CSV written by the ``csv`` module) where
        psycopg2 is the driver and every value is of a type whose text Postgres reads back as the
        same value psycopg2 would send (text, numbers, booleans, NULL, dates and times, decimals,
        UUIDs); otherwise, or
        with one row, as :meth:`executemany`. It costs the worker and the server about half of what
        ``execute_values`` costs per row (``bench/README.md``, "Design figures"). A refused row fails the
        ``COPY`` as it fails the ``INSERT``: the batch is
        then applied event by event, as for every database. The ``COPY`` goes with ``before`` in one
        query, and its data in one message: every call that waits on the server hands the interpreter
        lock to the receiving thread and waits to win it back.
        """
        if self.driver != "psycopg2" or len(rows) < 2:
            return super().insert_rows(cursor, table, columns, rows, before)
        classes = {value.__class__ for row in rows for value in row}
        if not classes <= _COPYABLE:
            return super().insert_rows(cursor, table, columns, rows, before)
        import csv
        import io

        if classes & _SPELLED:  # NULL and booleans as Postgres reads them in COPY (and as psycopg2 sends them)
            rows = [[_SPELLING[value.__class__](value) if value.__class__ in _SPELLED else value for value in row]
                    for row in rows]
        buffer = io.StringIO()
        # QUOTE_NONNUMERIC: text and times quoted (a quoted field is never NULL, so "" and "\\N" stay
        # text), numbers bare, and the _Bare spellings bare
        csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n").writerows(rows)
        text = buffer.getvalue()
        if "\x00" in text:  # Postgres text holds no NUL: let INSERT refuse the row by name
            return super().insert_rows(cursor, table, columns, rows, before)
        copy = f"COPY {table} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv, NULL '{_NULL}')"
        # size: the whole text in one read and one message (psycopg2 reads 8 KiB at a time by default)
        cursor.copy_expert(before + copy.encode(), io.StringIO(text), size=max(8192, len(text)))


class _Bare(float):
    """
    A field written bare: the ``csv`` module writes a number without quotes, as its text
    (``QUOTE_NONNUMERIC`` quotes everything else), so an instance stands in the CSV as ``text``.
    """

    text: str

    def __new__(cls, text: str) -> _Bare:
        bare = super().__new__(cls, 0.0)
        bare.text = text
        return bare

    def __str__(self) -> str:
        return self.text

    __repr__ = __str__


_NULL, _TRUE, _FALSE = _Bare("\\N"), _Bare("true"), _Bare("false")
_SPELLING = {type(None): lambda _: _NULL, bool: lambda value: _TRUE if value else _FALSE}
_SPELLED = frozenset(_SPELLING)
# the value types whose CSV text Postgres reads back as the same value psycopg2 would have sent
_COPYABLE = frozenset({type(None), str, int, float, bool, datetime.datetime, datetime.date, datetime.time,
                       decimal.Decimal, uuid.UUID})


class MysqlDialect(Dialect):
    """
    MySQL and MariaDB (InnoDB): ``INSERT IGNORE`` / ``ON DUPLICATE KEY UPDATE``, ``VARCHAR`` keys.
    A batch's rows go as multi-row ``INSERT ... VALUES``: with PyMySQL written by the package
    (:meth:`insert_statements`), with mysqlclient by its ``executemany``.
    """

    name = "MySQL/MariaDB"
    kind = "mysql"
    # InnoDB cannot index TEXT, and a key is at most 3072 bytes (768 characters of utf8mb4) over all
    # its columns: the widest key (deferred) has four text columns.
    key_type = "VARCHAR(190)"

    @property
    def statement_atomic(self) -> bool:
        """InnoDB rolls a failed statement back alone (a multi-row ``INSERT`` refused at any row leaves none of its rows)."""
        return True

    def insert_statements(
        self, cursor: Any, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> list[str] | None:
        """
        With PyMySQL: ``INSERT ... VALUES (...), (...)`` statements of at most the cursor's
        ``max_stmt_length`` bytes, each value written as PyMySQL writes it (:func:`pymysql_values`).
        PyMySQL's ``executemany`` builds the same statements, but through its general parameter
        formatting per row, about five times the interpreter's work of this (``bench/README.md``, "Design figures").
        """
        if self.driver != "pymysql" or not columns or not rows:
            return None
        head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
        limit = cursor.max_stmt_length
        encoding = cursor.connection.encoding
        statements: list[str] = []
        chunk: list[str] = []
        size = len(head)
        for values in pymysql_values(cursor.connection, rows):
            length = (len(values) if values.isascii() else len(values.encode(encoding))) + 1
            if chunk and size + length > limit:
                statements.append(head + ",".join(chunk))
                chunk, size = [], len(head)
            chunk.append(values)
            size += length
        statements.append(head + ",".join(chunk))
        return statements

    def insert_ignore(self, table: str, columns: Sequence[str], keys: Sequence[str]) -> str:
        marks = ", ".join("?" for _ in columns)
        return f"INSERT IGNORE INTO {table} ({', '.join(columns)}) VALUES ({marks})"

    def upsert(self, table: str, columns: Sequence[str], keys: Sequence[str], updates: Mapping[str, str]) -> str:
        marks = ", ".join("?" for _ in columns)
        sets = ", ".join(f"{c} = " + e.format(new=f"VALUES({c})", old=c) for c, e in updates.items())
        return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {sets}"


def pymysql_values(conn: Any, rows: Sequence[Sequence[Any]]) -> list[str]:
    """
    Each row as the ``(v,v,...)`` PyMySQL's ``executemany`` sends for it on ``conn``: every value
    through the connection's own ``escape``, except text, integers and ``None`` where the connection
    writes them as PyMySQL's converters do (the same functions, called here without the lookups).
    """
    from pymysql import constants, converters

    escape = conn.escape
    quote = converters.escape_string
    plain_text = not conn.server_status & constants.SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES
    plain_int = conn.encoders.get(int) is converters.escape_int
    plain_none = conn.encoders.get(type(None)) is converters.escape_None
    columns: list[list[str]] = []
    for column in zip(*rows, strict=True):
        kinds = set(map(type, column))
        if kinds == {str} and plain_text:
            columns.append(["'" + quote(v) + "'" for v in column])
        elif kinds <= {str, type(None)} and plain_text and plain_none:
            columns.append(["NULL" if v is None else "'" + quote(v) + "'" for v in column])
        elif kinds <= {int, type(None)} and plain_int and plain_none:
            columns.append(["NULL" if v is None else int.__repr__(v) for v in column])
        else:
            columns.append([escape(v) for v in column])
    return ["(" + ",".join(values) + ")" for values in zip(*columns, strict=True)]


# The databases ingestion supports, with the DB-API driver modules it recognises for each. PyMySQL
# is the MySQL/MariaDB driver the package depends on: pure Python, so it installs on any worker
# without client headers (mysqlclient, ``MySQLdb``, is faster but needs libmysqlclient to build);
# the batch writes are multi-row ``VALUES`` (written by the package, :func:`pymysql_values`), so the
# driver's per-row speed hardly shows. Connections of mysqlclient work as well.
SUPPORTED: dict[type[Dialect], tuple[str, ...]] = {
    SqliteDialect: ("sqlite3", "_sqlite3"),
    PostgresDialect: ("psycopg2", "psycopg"),
    MysqlDialect: ("pymysql", "MySQLdb"),
}

# Airflow connection types (``conn_type``) whose hooks give one of those connections.
SUPPORTED_CONN_TYPES: dict[str, type[Dialect]] = {
    "sqlite": SqliteDialect,
    "postgres": PostgresDialect,
    "mysql": MysqlDialect,
}


def supported_text() -> str:
    """The supported databases and their driver modules, as error messages list them."""
    return "; ".join(f"{d.name} ({', '.join(m for m in mods if not m.startswith('_'))})" for d, mods in SUPPORTED.items())


def check_conn_type(conn_type: str | None, conn_id: str) -> None:
    """Refuse an Airflow connection whose type ingestion does not support, before it is opened."""
    if (conn_type or "").lower() not in SUPPORTED_CONN_TYPES:
        raise SinkConfigError(
            f"SQL connection {conn_id!r} is of type {conn_type!r}, which ingestion does not support; supported "
            f"connection types: {', '.join(sorted(SUPPORTED_CONN_TYPES))} ({supported_text()})."
        )
