"""Start and stop the local stack in the background for the demo and for development.

``python -m tests.support.stack up`` starts Azurite and the local Event Hubs endpoint (with its
Schema Registry over HTTPS, the schema group ``orders``, and a private CA's certificates under
``.local/tls/``) on 127.0.0.1, detached, with PID files and logs under ``.local/``; ``down`` stops exactly the
processes whose PID files it wrote (and only if those PIDs still run the command it started);
``status`` prints what runs; ``env`` prints the ``AIRFLOW_CONN_*`` lines for a shell.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventhubs_local.azurite import command as azurite_command
from eventhubs_local.azurite import connection_string as azurite_connection_string
from eventhubs_local.launcher import command, connection_string, spawn

from tests.support.tls import make_certificates

REPO = Path(__file__).resolve().parents[2]
LOCAL = Path(os.environ.get("EH_LOCAL_DIR", REPO / ".local"))
HOST = "127.0.0.1"
EVENT_HUBS_PORT = int(os.environ.get("EH_PORT", "5672"))
EVENT_HUBS_ADMIN_PORT = int(os.environ.get("EH_ADMIN_PORT", "5680"))
AZURITE_PORT = int(os.environ.get("AZURITE_PORT", "10000"))
REGISTRY_PORT = int(os.environ.get("EH_REGISTRY_PORT", "5681"))
DEMO_HUBS = {"orders": 4}
DEMO_CONSUMER_GROUPS = {"orders": ["analytics", "lakehouse", "spark-analytics"]}
# the example pipeline registers its order event's Avro schema in this group
SCHEMA_GROUPS = {"orders": ("Avro", "Backward")}
# the registry's certificate and the CA that signed it (the connection's ca_bundle), made at each start
TLS = LOCAL / "tls"
# the key the stack's connection strings carry (the endpoint it starts checks no key)
KEY_NAME = KEY = "local"


@dataclass(frozen=True)
class Service:
    """A process of the stack: its name, the port it listens on, its command line, a word of that
    command line that tells the process apart from any other that reuses its PID, and what to prepare
    before it starts."""

    name: str
    port: int
    argv: list[str]
    marker: str
    prepare: Callable[[], object] | None = None
    more_ports: tuple[int, ...] = ()  # further ports it listens on (the registry's)

    @property
    def pid_file(self) -> Path:
        return LOCAL / "run" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return LOCAL / "logs" / f"{self.name}.log"


def services() -> list[Service]:
    """The stack's processes: Azurite and the local Event Hubs endpoint with the demo's hubs and its registry."""
    return [
        Service(
            "azurite",
            AZURITE_PORT,
            azurite_command(HOST, AZURITE_PORT, LOCAL / "azurite"),
            "--blobPort",
        ),
        Service(
            "event-hubs",
            EVENT_HUBS_PORT,
            command(
                LOCAL / "event-hubs", host=HOST, port=EVENT_HUBS_PORT, admin_port=EVENT_HUBS_ADMIN_PORT,
                hubs=DEMO_HUBS, consumer_groups=DEMO_CONSUMER_GROUPS, key_name=KEY_NAME, key=KEY,
                tls=(TLS / "server.pem", TLS / "server.key"), registry_port=REGISTRY_PORT, schema_groups=SCHEMA_GROUPS,
            ),
            str(LOCAL / "event-hubs"),
            prepare=lambda: make_certificates(TLS, days=30),
            more_ports=(REGISTRY_PORT,),
        ),
    ]


def event_hubs_connection_string(hub: str | None = None) -> str:
    """The connection string of the stack's endpoint (namespace level, or of ``hub``)."""
    return connection_string(HOST, EVENT_HUBS_PORT, KEY_NAME, KEY, hub)


def connection_env(event_hubs: str | None = None, blob: str | None = None, spark_master: str = "local[*]",
                   schema_registry: tuple[str, str | os.PathLike[str]] | None = None) -> dict[str, str]:
    """``AIRFLOW_CONN_*`` values for Event Hubs (with its Schema Registry), Blob storage and Spark local
    mode; by default the local stack's.

    :param event_hubs: an Event Hubs connection string (namespace level).
    :param blob: a Blob storage connection string.
    :param spark_master: the ``spark_default`` master.
    :param schema_registry: ``(namespace, CA bundle)`` of the Schema Registry (``host:port`` and the PEM
        file its certificate is trusted by); default: the local stack's without ``event_hubs``, none with it.
    """
    if event_hubs is None:
        event_hubs, schema_registry = event_hubs_connection_string(), schema_registry or local_schema_registry()
    registry = {} if schema_registry is None else {
        "schema_registry_namespace": schema_registry[0], "ca_bundle": str(schema_registry[1])}
    return {
        "AIRFLOW_CONN_AZURE_EVENT_HUBS_DEFAULT": json.dumps(
            {"conn_type": "azure_event_hubs", "extra": {"connection_string": event_hubs, **registry}}
        ),
        "AIRFLOW_CONN_WASB_DEFAULT": json.dumps(
            {"conn_type": "wasb", "extra": {"connection_string": blob or azurite_connection_string(HOST, AZURITE_PORT)}}
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": spark_master}),
    }


def local_schema_registry() -> tuple[str, Path]:
    """``(namespace, CA bundle)`` of the stack's Schema Registry."""
    return f"{HOST}:{REGISTRY_PORT}", TLS / "ca.pem"


def example_env(db: Path, data_dir: Path, **connections: Any) -> dict[str, str]:
    """What the example DAGs read from the environment: the connections of :func:`connection_env`
    (``connections`` are its arguments), ``eh_example_db`` (the SQLite file ``db``), their data folder,
    the Python that Spark's workers run, and the secrets of the Spark application that
    ``eh_spark_submit_publish`` submits (a cluster's own environment holds them in a deployment)."""
    conns = connection_env(**connections)
    return {
        **conns,
        # what a Spark job submitted to the cluster reads its secrets from (eh_spark_submit_publish's application)
        "EH_CONNECTION_STRING": json.loads(conns["AIRFLOW_CONN_AZURE_EVENT_HUBS_DEFAULT"])["extra"]["connection_string"],
        "EH_STATE_CONNECTION_STRING": json.loads(conns["AIRFLOW_CONN_WASB_DEFAULT"])["extra"]["connection_string"],
        "AIRFLOW_CONN_EH_EXAMPLE_DB": json.dumps({"conn_type": "sqlite", "host": str(db)}),
        "EH_EXAMPLE_DATA_DIR": str(data_dir),
        "PYSPARK_PYTHON": sys.executable,
        # spark-submit (SparkSubmitOperator), from the PySpark beside this interpreter, as `make` puts it on PATH
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }


def _running_pid(service: Service) -> int | None:
    """The PID from the service's PID file if that process still runs the command we started."""
    try:
        pid = int(service.pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if service.marker.encode() in cmdline else None


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.3):
            return True
    except OSError:
        return False


def up(timeout: float = 60) -> None:
    """Start every service that is not running, detached, waiting up to ``timeout`` seconds for each to listen."""
    for service in services():
        if _running_pid(service):
            missing = [port for port in service.more_ports if not _listening(port)]
            if missing:
                raise SystemExit(f"{service.name}: running (pid {_running_pid(service)}) but not listening on "
                                 f"{HOST}:{missing[0]}: started by an older version of this stack? Stop it "
                                 "(make services-down) and start it again")
            print(f"{service.name}: already running (pid {_running_pid(service)}) on {HOST}:{service.port}")
            continue
        if _listening(service.port):
            raise SystemExit(
                f"{service.name}: port {HOST}:{service.port} is taken by a process this stack did not start; "
                f"stop it or set {'AZURITE_PORT' if service.name == 'azurite' else 'EH_PORT'} to another port"
            )
        service.pid_file.parent.mkdir(parents=True, exist_ok=True)
        if service.prepare is not None:
            service.prepare()
        proc = spawn(service.argv, service.log_file, cwd=REPO)  # detached: it outlives this command
        service.pid_file.write_text(str(proc.pid))
        deadline = time.monotonic() + timeout
        while not all(_listening(port) for port in (service.port, *service.more_ports)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{service.name} did not start; see {service.log_file}")
            time.sleep(0.2)
        print(f"{service.name}: started (pid {proc.pid}) on {HOST}:{service.port}, log {service.log_file}")


def down() -> None:
    """Stop the services this stack started (SIGTERM, then SIGKILL after 10 seconds); others are left alone."""
    for service in services():
        pid = _running_pid(service)
        if pid is None:
            print(f"{service.name}: not started by this stack")
        else:
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if not Path(f"/proc/{pid}").exists() or _running_pid(service) is None:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
            print(f"{service.name}: stopped (pid {pid})")
        service.pid_file.unlink(missing_ok=True)


def status() -> None:
    """Print whether each service runs, with its PID and address."""
    for service in services():
        pid = _running_pid(service)
        print(f"{service.name}: {f'running, pid {pid}' if pid else 'stopped'} ({HOST}:{service.port})")


def main(argv: list[str] | None = None) -> None:
    """The command line: ``up``, ``down``, ``status`` or ``env``."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.stack", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status", "env"])
    args = parser.parse_args(argv)
    if args.command == "env":
        for key, value in connection_env().items():
            print(f"export {key}='{value}'")
        return
    {"up": up, "down": down, "status": status}[args.command]()


if __name__ == "__main__":
    main()
