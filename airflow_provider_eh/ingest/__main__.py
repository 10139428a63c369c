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
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.errors import EventHubsProviderError, SinkConfigError
from airflow_provider_eh.ingest.admin import complete_session, replay_dead_letters
from airflow_provider_eh.ingest.processor import BatchProcessor
from airflow_provider_eh.ingest.rows import load_row_function
from airflow_provider_eh.ingest.sinks.sql.store import SqlIngestStore, Stream
from airflow_provider_eh.ingest.sinks.sql.tables import DEFAULT_PREFIX


def _connection(args: argparse.Namespace) -> Any:
    if args.sqlite:
        return sqlite3.connect(args.sqlite)
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(args.sql_conn_id).get_hook().get_conn()


def _registry(conn_id: str) -> Any:
    """The Schema Registry of an Airflow connection, read when the first typed dead letter is replayed."""
    def endpoint() -> Any:
        from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook

        return SchemaRegistryHook(conn_id).get_endpoint()

    return endpoint


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


def _decoder(args: argparse.Namespace) -> TypedDecoder:
    """The decoder of typed dead letters: the registry of ``--schema-registry-conn-id``, else none configured."""
    conn_id = args.schema_registry_conn_id
    return TypedDecoder(_registry(conn_id) if conn_id else None, conn_id=conn_id)


def _delta(args: argparse.Namespace) -> int:
    """``list`` and ``replay`` on a Delta sink."""
    from airflow_provider_eh.hooks.blob import delta_storage_options
    from airflow_provider_eh.ingest.sinks.delta import MERGE, DeltaIngestStore, DeltaTarget

    try:
        options = delta_storage_options(args.delta, args.wasb_conn_id)
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
            result = _replay(args, store, "delta_table")
        else:
            raise SinkConfigError(f"{args.command}: a Delta sink keeps no sessions; list and replay only")
    except EventHubsProviderError as exc:
        return _failed(exc)
    finally:
        store.close()
    return _printed(result)


def _replay(args: argparse.Namespace, store: Any, table: str) -> Any:
    """``replay`` on either kind of sink: the dead letters the arguments pick, through the row function."""
    if args.sequence_numbers and args.partition is None:
        raise SinkConfigError("--sequence-number needs --partition")
    columns = args.columns.split(",") if args.columns else None
    decoder = _decoder(args)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command of the dead-letter tool and print its result as JSON; the exit status is 2 on a
    provider error (printed to stderr)."""
    args = _parser().parse_args(argv)
    if args.delta:
        return _delta(args)
    store = SqlIngestStore(
        _connection(args), Stream(args.namespace, args.eventhub, args.consumer_group), prefix=args.prefix
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
            result = _replay(args, store, args.table)
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
