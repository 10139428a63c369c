"""``python -m airflow_provider_eh.ingest``: look at and act on the ingestion state from a shell.

Commands print JSON::

    ... list [--status dead|replaying|replayed|all] [--partition P]
    ... replay [--partition P [--sequence-number N ...]] [--reason R ...]
    ... sessions
    ... complete-session KEY

The database is a SQLite file (``--sqlite PATH``) or an Airflow SQL connection (``--sql-conn-id``,
which needs Airflow and the connection's provider). ``replay`` writes with ``--row-function``
(``json``, or ``package.module:function``) into ``--table``; typed dead letters (Schema Registry) are
decoded with the registry of ``--schema-registry-conn-id`` (an Airflow ``azure_event_hubs`` connection).
With ``--delta URI`` the sink is that Delta table (a local path; an Azure URI with the credentials of
``--wasb-conn-id``), its dead letters in ``--dead-letter-table`` (default ``<URI>_dead_letters``):
``list`` and ``replay`` only.

The command line imports no Airflow: what an ``--*-conn-id`` option names is read by
:class:`Connections`, by default the Airflow shell's
(:class:`~airflow_provider_eh.hooks.ingest_connections.AirflowConnections`), loaded by name only when such
a connection is needed; :func:`main` takes another.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sqlite3
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.errors import EventHubsProviderError, SinkConfigError
from airflow_provider_eh.ingest.admin import complete_session, replay_dead_letters
from airflow_provider_eh.ingest.processor import BatchProcessor
from airflow_provider_eh.ingest.rows import load_row_function
from airflow_provider_eh.ingest.sinks.delta import MERGE, DeltaIngestStore, DeltaTarget
from airflow_provider_eh.ingest.sinks.sql.store import SqlIngestStore, Stream
from airflow_provider_eh.ingest.sinks.sql.tables import DEFAULT_PREFIX

#: the Airflow shell's reader of Airflow connections, as ``module:class``
AIRFLOW_CONNECTIONS = "airflow_provider_eh.hooks.ingest_connections:AirflowConnections"


class Connections(Protocol):
    """What the command line reads from a connection id its options name."""

    def sql(self, conn_id: str) -> Any:
        """A DB-API connection of ``--sql-conn-id``."""
        ...

    def delta_storage_options(self, uri: str, wasb_conn_id: str) -> dict[str, str] | None:
        """The object store options of the Delta table at ``uri`` (``None``: a local path)."""
        ...

    def schema_registry(self, conn_id: str) -> Callable[[], Any]:
        """The Schema Registry endpoint of ``--schema-registry-conn-id``, read when first called."""
        ...


def airflow_connections() -> Connections:
    """The Airflow shell's :class:`Connections` (:data:`AIRFLOW_CONNECTIONS`); it needs Airflow installed."""
    module, _, name = AIRFLOW_CONNECTIONS.partition(":")
    connections: Connections = getattr(importlib.import_module(module), name)()
    return connections


def _connection(args: argparse.Namespace, connections: Callable[[], Connections]) -> Any:
    if args.sqlite:
        return sqlite3.connect(args.sqlite)
    return connections().sql(args.sql_conn_id)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_eh.ingest", description=__doc__.split("\n")[0])
    db = parser.add_mutually_exclusive_group(required=True)
    db.add_argument("--sqlite", help="path of a SQLite database")
    db.add_argument("--sql-conn-id", help="an Airflow SQL connection id")
    db.add_argument("--delta", help="a Delta table's path or abfss:// / az:// URI (list and replay)")
    parser.add_argument("--wasb-conn-id", default="wasb_default", help="with --delta on Azure storage")
    parser.add_argument("--dead-letter-table", help="with --delta: the dead-letter table (default <URI>_dead_letters)")
    parser.add_argument("--merge-keys", help="with --delta: comma-separated key columns of a table written by merge")
    parser.add_argument("--namespace", required=True, help="fully qualified namespace, as in the state tables")
    parser.add_argument("--eventhub", required=True)
    parser.add_argument("--consumer-group", default="$Default")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX, help="prefix of the state tables")
    parser.add_argument("--table", help="target table (replay)")
    parser.add_argument("--row-function", default="json", help="'json' or package.module:function (replay)")
    parser.add_argument("--columns", help="comma-separated JSON keys to keep with --row-function json")
    parser.add_argument("--schema-registry-conn-id",
                        help="an Airflow azure_event_hubs connection whose Schema Registry decodes typed events (replay)")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="dead letters")
    listing.add_argument("--status", default="dead", choices=["dead", "replaying", "replayed", "all"])
    listing.add_argument("--partition")
    replay = sub.add_parser("replay", help="apply dead letters again")
    replay.add_argument("--partition")
    replay.add_argument("--sequence-number", type=int, action="append", dest="sequence_numbers")
    replay.add_argument("--reason", action="append", dest="reasons")
    sub.add_parser("sessions", help="session states and deferred events")
    complete = sub.add_parser("complete-session", help="complete a session; its deferred events become dead letters")
    complete.add_argument("session_key")
    return parser


def _decoder(args: argparse.Namespace, connections: Callable[[], Connections]) -> TypedDecoder:
    """The decoder of typed dead letters: the registry of ``--schema-registry-conn-id``, else none configured."""
    conn_id = args.schema_registry_conn_id
    return TypedDecoder(connections().schema_registry(conn_id) if conn_id else None, conn_id=conn_id)


def _delta(args: argparse.Namespace, connections: Callable[[], Connections]) -> int:
    """``list`` and ``replay`` on a Delta sink."""
    try:
        options = connections().delta_storage_options(args.delta, args.wasb_conn_id)
    except EventHubsProviderError as exc:
        return _failed(exc)
    keys = args.merge_keys.split(",") if args.merge_keys else None
    target = DeltaTarget(args.delta, options, mode=MERGE if keys else "append", merge_keys=keys,
                         dead_letter_uri=args.dead_letter_table)
    store = DeltaIngestStore(target, Stream(args.namespace, args.eventhub, args.consumer_group))
    try:
        if args.command == "list":
            fields = ("partition_id", "sequence_number", "event_offset", "reason", "error", "failed_at", "status",
                      "attempts", "replayed_at")
            result: Any = [
                {k: d[k] for k in fields}
                for d in store.dead_letters()
                if (args.status == "all" or d["status"] == args.status)
                and (args.partition is None or d["partition_id"] == args.partition)
            ]
        elif args.command == "replay":
            result = _replay(args, store, "delta_table", connections)
        else:
            raise SinkConfigError(f"{args.command}: a Delta sink keeps no sessions; list and replay only")
    except EventHubsProviderError as exc:
        return _failed(exc)
    finally:
        store.close()
    return _printed(result)


def _replay(args: argparse.Namespace, store: Any, table: str, connections: Callable[[], Connections]) -> Any:
    """``replay`` on either kind of sink: the dead letters the arguments pick, through the row function."""
    if args.sequence_numbers and args.partition is None:
        raise SinkConfigError("--sequence-number needs --partition")
    columns = args.columns.split(",") if args.columns else None
    decoder = _decoder(args, connections)
    processor = BatchProcessor(table, load_row_function(args.row_function, columns), decoder=decoder)
    try:
        return replay_dead_letters(store, processor, partition_id=args.partition,
                                   sequence_numbers=args.sequence_numbers, reasons=args.reasons)
    finally:
        decoder.close()


def _failed(exc: EventHubsProviderError) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 2


def _printed(result: Any) -> int:
    print(json.dumps(result, indent=2, default=str))
    return 0


def main(argv: Sequence[str] | None = None, connections: Callable[[], Connections] = airflow_connections) -> int:
    """Run one command of the dead-letter tool and print its result as JSON; the exit status is 2 on a
    provider error (printed to stderr).

    :param connections: gives what reads the connection ids of the options, called only when one is needed.
    """
    args = _parser().parse_args(argv)
    if args.delta:
        return _delta(args, connections)
    store = SqlIngestStore(
        _connection(args, connections), Stream(args.namespace, args.eventhub, args.consumer_group), prefix=args.prefix
    )
    try:
        if args.command == "list":
            letters = store.dead_letters(status=None if args.status == "all" else args.status, partition_id=args.partition)
            result: Any = [
                {
                    "partition_id": d.event.partition_id, "sequence_number": d.event.sequence_number,
                    "offset": d.event.offset, "reason": d.reason, "error": d.error, "failed_at": d.failed_at,
                    "status": d.status, "attempts": d.attempts, "body": d.event.body.decode("utf-8", "replace"),
                }
                for d in letters
            ]
        elif args.command == "replay":
            if not args.table:
                raise SinkConfigError("replay needs --table, the table the row function writes to")
            result = _replay(args, store, args.table, connections)
        elif args.command == "sessions":
            result = store.sessions()
        else:
            result = complete_session(store, args.session_key)
    except EventHubsProviderError as exc:
        return _failed(exc)
    finally:
        store.close()
    return _printed(result)


if __name__ == "__main__":
    sys.exit(main())
