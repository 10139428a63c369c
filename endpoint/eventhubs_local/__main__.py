"""Command line: ``python -m eventhubs_local --data-dir DIR --hub orders:4 ...``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import ssl
import sys
from pathlib import Path

from .admin import AdminServer
from .auth import RIGHTS, SasValidator, parse_rights
from .broker import FSYNC_POLICIES, Broker
from .launcher import DEFAULT_KEY, DEFAULT_KEY_NAME, connection_string
from .registry import Registry
from .registry_http import RegistryServer
from .server import Server
from .store import Store, StoreError


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The endpoint's command line (``python -m eventhubs_local --help`` lists it)."""
    parser = argparse.ArgumentParser(prog="python -m eventhubs_local",
                                     description="Local Event Hubs endpoint (AMQP 1.0) for the azure-eventhub SDK.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5672, help="AMQP port; 0 picks a free one")
    parser.add_argument("--websocket-port", type=int, default=None,
                        help="also serve AMQP over WebSockets (path /$servicebus/websocket) on this port; 0 picks a free one")
    parser.add_argument("--registry-port", type=int, default=None,
                        help="serve the Schema Registry's data plane over HTTPS on this port (needs --tls-cert and "
                             "--tls-key); 0 picks a free one")
    parser.add_argument("--schema-group", action="append", default=[], metavar="NAME[:FORMAT[:COMPATIBILITY]]",
                        help="a schema group to create at start: FORMAT Avro (default), Json or Custom; "
                             "COMPATIBILITY None (default), Backward or Forward (repeat it)")
    parser.add_argument("--tls-cert", default=None,
                        help="PEM certificate (chain) for the WebSocket listener (wss://) and the Schema Registry (https://)")
    parser.add_argument("--tls-key", default=None, help="PEM private key of --tls-cert")
    parser.add_argument("--admin-port", type=int, default=5680, help="admin HTTP port on 127.0.0.1; 0 picks a free one")
    parser.add_argument("--data-dir", required=True, help="where partition logs and hubs.json live")
    parser.add_argument("--hub", action="append", default=[], metavar="NAME[:PARTITIONS]", help="hub to create")
    parser.add_argument("--consumer-group", action="append", default=[], metavar="HUB:GROUP")
    parser.add_argument("--fsync", choices=FSYNC_POLICIES, default="batch",
                        help="always: fsync per append; batch (default): group commit per loop pass; never: page cache")
    parser.add_argument("--retention-seconds", type=float, default=None)
    parser.add_argument("--retention-bytes", type=int, default=None, help="per partition")
    parser.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024, help="log segment size")
    parser.add_argument("--require-auth", action="store_true", help="validate SAS tokens put on $cbs")
    parser.add_argument("--no-idempotent-producers", dest="idempotent_producers", action="store_false",
                        help="do not offer the idempotent-producer capability (a namespace without the feature)")
    parser.add_argument("--sas-key-name", default=DEFAULT_KEY_NAME, help="the main key's name (it has every right)")
    parser.add_argument("--sas-key", default=DEFAULT_KEY, help="the main key")
    parser.add_argument("--sas-rule", action="append", default=[], type=sas_rule, metavar="NAME=KEY:RIGHTS",
                        help=f"a further key with its rights, a comma list of {', '.join(RIGHTS)} (Manage brings the "
                             "other two); e.g. listen-only=secret:Listen (repeat it)")
    parser.add_argument("--ready-file", default=None,
                        help="write {host, port, admin_port, pid, websocket_port, registry_port} as JSON once listening")
    parser.add_argument("--exit-with-parent", type=int, default=None, metavar="PID",
                        help="stop when process PID (the parent that started us) is gone")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


def sas_rule(spec: str) -> tuple[str, str, frozenset[str]]:
    """``NAME=KEY:RIGHTS`` as ``(name, key, rights)`` (the key may hold ``=`` and ``:``; the rights follow the last ``:``)."""
    name, sep, rest = spec.partition("=")
    key, colon, rights = rest.rpartition(":")
    if not (name and sep and key and colon):
        raise argparse.ArgumentTypeError(f"--sas-rule {spec!r} must be NAME=KEY:RIGHTS, e.g. listen-only=secret:Listen")
    try:
        return name, key, parse_rights(rights)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--sas-rule {spec!r}: {exc}") from None


async def serve(args: argparse.Namespace) -> None:
    """Create the hubs and consumer groups the arguments name, then serve AMQP and the admin API until stopped."""
    log = logging.getLogger("eventhubs_local")
    broker = _broker(args)
    registry = _registry(args)
    tls = _tls(args)
    server = Server(broker, args.host, args.port, websocket_port=args.websocket_port, websocket_tls=tls)
    admin = AdminServer(broker, "127.0.0.1", args.admin_port, registry=registry)
    registry_server = None
    if args.registry_port is not None:
        assert tls is not None
        registry_server = RegistryServer(registry, args.host, args.registry_port, tls, broker.validator)
    port = await server.start()
    admin_port = await admin.start()
    registry_port = await registry_server.start() if registry_server else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("listening on %s:%d (AMQP), admin on http://127.0.0.1:%d, data in %s, fsync=%s, auth=%s",
             args.host, port, admin_port, args.data_dir, args.fsync, "required" if broker.validator else "off")
    if server.websocket_port is not None:
        log.info("AMQP over WebSockets on %s://%s:%d/$servicebus/websocket", "wss" if tls else "ws", args.host,
                 server.websocket_port)
    if registry_port is not None:
        log.info("Schema Registry on https://%s:%d/$schemaGroups (%d schema groups)", args.host, registry_port,
                 len(registry.groups))
    print("Connection string: " + connection_string(args.host, port, args.sas_key_name, args.sas_key), flush=True)
    if args.ready_file:
        _write_ready_file(args.ready_file, {"host": args.host, "port": port, "admin_port": admin_port,
                                            "pid": os.getpid(), "websocket_port": server.websocket_port,
                                            "registry_port": registry_port})
    if args.exit_with_parent:
        loop.create_task(_watch_parent(args.exit_with_parent, stop))
    await stop.wait()
    log.info("stopping")
    await admin.close()
    if registry_server:
        await registry_server.close()
    await server.close()
    log.info("stopped")


def _broker(args: argparse.Namespace) -> Broker:
    """The broker over the data directory, with the hubs, consumer groups and keys the arguments name."""
    store = Store(Path(args.data_dir), segment_bytes=args.segment_bytes)
    for spec in args.hub:
        name, _, count = spec.partition(":")
        store.create_hub(name, int(count) if count else 4)
    for spec in args.consumer_group:
        hub, sep, group = spec.partition(":")
        if not sep:
            raise StoreError(f"--consumer-group {spec!r} must be HUB:GROUP")
        store.add_consumer_group(hub, group)
    rules = {name: (key, rights) for name, key, rights in args.sas_rule}
    try:
        validator = SasValidator(args.sas_key_name, args.sas_key, rules) if args.require_auth else None
    except ValueError as exc:
        raise StoreError(f"--sas-rule: {exc}") from None
    return Broker(store, fsync=args.fsync, validator=validator, idempotent_producers=args.idempotent_producers,
                  retention_seconds=args.retention_seconds, retention_bytes=args.retention_bytes)


def _registry(args: argparse.Namespace) -> Registry:
    """The Schema Registry's store in the data directory, with the schema groups the arguments name."""
    registry = Registry(Path(args.data_dir))
    for spec in args.schema_group:
        name, _, rest = spec.partition(":")
        fmt, _, compat = rest.partition(":")
        try:
            registry.create_group(name, fmt or "Avro", compat or "None")
        except ValueError as exc:
            raise StoreError(f"--schema-group {spec!r}: {exc}") from None
    return registry


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The server's TLS context of ``--tls-cert`` and ``--tls-key``, for the WebSocket listener and the registry."""
    tls = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key and (args.websocket_port is not None or args.registry_port is not None)):
            raise StoreError("--tls-cert and --tls-key go together, with --websocket-port or --registry-port "
                             "(TLS is the WebSocket listener's and the Schema Registry's)")
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    if args.registry_port is not None and tls is None:
        raise StoreError("--registry-port needs --tls-cert and --tls-key: the Schema Registry is served over HTTPS only "
                         "(its clients send their tokens to https:// addresses alone)")
    return tls


def _write_ready_file(path: str, ready: dict[str, object]) -> None:
    """``ready`` as JSON at ``path``, written whole (a reader never sees half of it)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(ready, fh)
    os.replace(tmp, path)


async def _watch_parent(pid: int, stop: asyncio.Event) -> None:
    """Set ``stop`` once ``pid`` no longer is our parent (it died): no orphaned servers after a killed test run."""
    while not stop.is_set():
        if os.getppid() != pid:
            logging.getLogger("eventhubs_local").info("parent %d is gone; stopping", pid)
            stop.set()
            return
        await asyncio.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    """Run the endpoint; the exit status is 2 for a bad hub or consumer group, 1 when a port cannot be bound."""
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(args))
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
