"""The fault table, tested per path: every cell of ``cases.CELLS`` made for real and checked.

Each cell points an Event Hubs connection (``eh_cell``) and a blob connection (``wasb_cell``) at the
fault (:func:`make_fault`), runs the path as Airflow would (:data:`RUNNERS`: an operator's
``execute``, a trigger's ``run()`` whose event goes to the sensor's ``execute_complete``, a hook's
``test_connection``), and checks four things: the error message holds the cell's parts (and no
secret), the retry class (``fail``: ``AirflowFailException`` or a non-retryable provider error;
``retry``), the time to fail, and what landed, read back (the hub's events, the checkpoint blobs,
the SQL sink). Hubs, containers and sinks are the cell's own; the services are the module's.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path as FilePath
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient


from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.client.network import NetworkOptions  # noqa: E402
from airflow_provider_eh.client.readback import read_hub  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from tests.conftest import connection_env, unique_name  # noqa: E402
from tests.integration.failures.cases import CELLS, Cell  # noqa: E402
from tests.support.proxy import HttpProxy  # noqa: E402
from tests.support.tls import Certificates, make_certificates  # noqa: E402

EH, WASB, SINK = "eh", "wasb", "sink"
KEY_NAME, KEY = "matrix", "the-matrix-key"
PROXY_USER, PROXY_PASSWORD = "svc", "the-pr0xy-password"
GROUP = "analytics"
EVENTS = 12
START = datetime(2026, 5, 1, tzinfo=timezone.utc)
RULES = {"listen-only": ("the-listen-only-key", ["Listen"]), "send-only": ("the-send-only-key", ["Send"])}
SECRETS = (KEY, *(key for key, _ in RULES.values()), PROXY_PASSWORD, "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq")  # Azurite's key, its start


@dataclass
class Setup:
    """One cell's fault: the two connections' fields, the names the path uses, and how to read back."""

    eh: dict[str, Any]
    reader: EventHubsEndpoint  # the same hub, reached the right way: what landed is read through it
    hub: str
    address: str
    wasb: dict[str, Any] = field(default_factory=dict)
    group: str = GROUP
    container: str = ""
    proxy: str = ""
    secrets: tuple[str, ...] = ()
    name: str = "cell"  # the cell's connections are eh_<name>, wasb_<name>, sink_<name>
    sink: FilePath | None = None

    @property
    def eh_conn(self) -> str:
        return f"{EH}_{self.name}"

    @property
    def wasb_conn(self) -> str:
        return f"{WASB}_{self.name}"

    @property
    def sink_conn(self) -> str:
        return f"{SINK}_{self.name}"

    def fill(self, part: str) -> str:
        return part.format(conn=self.eh_conn, wasb=self.wasb_conn, address=self.address, proxy=self.proxy, hub=self.hub,
                           group=self.group, container=self.container)

    def environ(self) -> dict[str, str]:
        """The ``AIRFLOW_CONN_*`` variables of the cell's three connections."""
        return dict((connection_env(self.eh_conn, "azure_event_hubs", extra=self.eh),
                     connection_env(self.wasb_conn, "wasb", extra=self.wasb),
                     connection_env(self.sink_conn, "sqlite", host=str(self.sink))))


@dataclass
class Outcome:
    """What the user got: the message, the retry class, the seconds it took."""

    message: str
    retry: str
    seconds: float


class Services(SimpleNamespace):
    """The module's services (conftest), handed to :func:`make_fault`."""


# ---- the faults -----------------------------------------------------------------------------------

def _network(endpoint_conn: str, hub: str, **fields: Any) -> EventHubsEndpoint:
    return EventHubsEndpoint.from_connection_string(endpoint_conn, hub, network=NetworkOptions.from_fields(fields))


def make_fault(cell: Cell, s: Services) -> Setup:
    """The cell's hub and container (new), and the connections that make its fault."""
    hub = unique_name("cell")
    s.secured.admin.create_hub(hub, partitions=2, consumer_groups=[GROUP])
    container = unique_name("c")
    BlobServiceClient.from_connection_string(s.azurite.connection_string).create_container(container)
    conn_str = s.secured.connection_string(hub)
    base = Setup(eh={"connection_string": conn_str}, reader=EventHubsEndpoint.from_connection_string(conn_str, hub),
                 hub=hub, address=f"127.0.0.1:{s.secured.port}", wasb={"connection_string": s.azurite.connection_string},
                 container=container)
    fault = cell.fault
    if fault == "wrong_sas_key":
        return replace(base, eh={"connection_string": conn_str.replace(f"SharedAccessKey={KEY}", "SharedAccessKey=not-the-key")})
    if fault == "expired_sas_token":
        from eventhubs_local.auth import sign

        token = sign(f"sb://127.0.0.1:{s.secured.port}/{hub}", KEY_NAME, KEY, int(time.time()) - 3600)
        expired = f"Endpoint=sb://127.0.0.1:{s.secured.port}/;SharedAccessSignature={token};EntityPath={hub};UseDevelopmentEmulator=true"
        return replace(base, eh={"connection_string": expired}, secrets=(token.split("sig=")[1].split("&")[0],))
    if fault in ("proxy_wrong_password", "proxy_refuses_connect", "proxy_down", "wrong_ca"):
        return _through_gateway(cell, base, s)
    if fault == "custom_endpoint_unresolvable":
        return replace(base, eh={**base.eh, "transport": "websocket", "custom_endpoint_address": "sb://no-such-host.invalid:443"},
                       address="no-such-host.invalid:443")
    if fault == "namespace_unresolvable":
        return replace(base, eh={"connection_string": conn_str.replace("127.0.0.1", "no-such-host.invalid")},
                       address=f"no-such-host.invalid:{s.secured.port}")
    if fault in ("send_right_missing", "listen_right_missing"):
        rule = "listen-only" if fault == "send_right_missing" else "send-only"
        return replace(base, eh={"connection_string": s.secured.connection_string(hub, rule=rule)})
    if fault == "hub_missing":
        return replace(base, hub=unique_name("no-such-hub"))
    if fault == "consumer_group_missing":
        return replace(base, group="no-such-group")
    if fault == "container_missing":
        return replace(base, container=unique_name("no-such-container"))
    if fault == "storage_forbidden":
        wrong = s.azurite.connection_string.replace("AccountKey=", "AccountKey=AAAA")
        return replace(base, wasb={"connection_string": wrong})
    if fault in ("server_busy", "endpoint_gone_mid_send", "hub_deleted_mid_run", "consumer_group_deleted_mid_run"):
        return base
    raise AssertionError(f"no way to make fault {fault!r}")


def _through_gateway(cell: Cell, base: Setup, s: Services) -> Setup:
    """The TLS gateway's hub, through a proxy or with another CA."""
    gateway_ca, other_ca = s.certificates
    hub = base.hub
    s.gateway.admin.create_hub(hub, partitions=2, consumer_groups=[GROUP])
    conn_str = s.gateway.connection_string(hub).replace(";UseDevelopmentEmulator=true", "")
    right = {"connection_string": conn_str, "transport": "websocket", "custom_endpoint_address": s.gateway.websocket_address,
             "ca_bundle": str(gateway_ca.ca)}
    setup = replace(base, reader=_network(conn_str, hub, **{k: v for k, v in right.items() if k != "connection_string"}),
                    address=f"127.0.0.1:{s.gateway.websocket_port}")
    if cell.fault == "wrong_ca":
        return replace(setup, eh={**right, "ca_bundle": str(other_ca.ca)})
    proxy = {"proxy_wrong_password": s.proxy, "proxy_refuses_connect": s.refusing_proxy}.get(cell.fault)
    port = proxy.port if proxy is not None else s.closed_port
    fields = {**right, "proxy_host": "127.0.0.1", "proxy_port": port}
    if cell.fault == "proxy_wrong_password":
        fields.update(proxy_username=PROXY_USER, proxy_password="not-the-pr0xy-password")
    return replace(setup, eh=fields, proxy=f"127.0.0.1:{port}", secrets=("not-the-pr0xy-password",))


# ---- the paths ------------------------------------------------------------------------------------

def _retry_class(exc: BaseException) -> str:
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, AirflowSensorTimeout

    from airflow_provider_eh.errors import EventHubsProviderError

    if isinstance(exc, AirflowSensorTimeout):
        return "timeout"
    if isinstance(exc, AirflowFailException):
        return "fail"
    if isinstance(exc, EventHubsProviderError):
        return "retry" if exc.retryable else "fail"
    if isinstance(exc, AirflowException):
        return "retry"
    return f"raw {type(exc).__name__}"


def _context() -> dict[str, Any]:
    return {"ti": SimpleNamespace(try_number=1, map_index=-1), "data_interval_start": START, "data_interval_end": START,
            "logical_date": START, "run_id": "scheduled__2026-05-01"}


def events_of(setup: Setup, pad: int = 0) -> list[dict[str, Any]]:
    """The cell's events; ``pad`` bytes of padding each (200 kB: a partition's six events take two SDK batches)."""
    return [{"body": {"id": f"{setup.hub}-{i}", "pad": "x" * pad}, "partition_id": str(i % 2)} for i in range(EVENTS)]


def run_publish(setup: Setup, pad: int = 0, **options: Any) -> Any:
    from airflow_provider_eh.operators.publish import EventHubPublishOperator

    operator = EventHubPublishOperator(
        task_id="publish", events=events_of(setup, pad), event_hubs_conn_id=setup.eh_conn, eventhub_name=setup.hub, wasb_conn_id=setup.wasb_conn,
        state_container=setup.container, producer_group="matrix", claim_timeout=0, **options)
    return operator.execute(_context())  # type: ignore[arg-type]


def run_test_connection(setup: Setup) -> Any:
    from airflow_provider_eh.hooks.event_hubs import EventHubHook

    ok, message = EventHubHook(setup.eh_conn, setup.hub).test_connection()
    if not ok:
        raise _Reported(message)
    return message


class _Reported(Exception):
    """``test_connection`` said no: its message, which has no retry class."""


def _trigger_kwargs(setup: Setup) -> dict[str, Any]:
    return {"eventhub_name": setup.hub, "consumer_group": setup.group, "checkpoint_container": setup.container,
            "event_hubs_conn_id": setup.eh_conn, "wasb_conn_id": setup.wasb_conn, "batch_size": 10, "batch_window": 0.5}


async def _first(gen: Any, timeout: float) -> Any:
    try:
        return await asyncio.wait_for(anext(gen), timeout)
    finally:
        await gen.aclose()


def run_event_trigger(setup: Setup) -> Any:
    from airflow_provider_eh.triggers.event import EventHubEventTrigger

    trigger = EventHubEventTrigger(**_trigger_kwargs(setup))
    return asyncio.run(_first(trigger.run(), 60))


def run_queue(setup: Setup) -> Any:
    from airflow.providers.common.messaging.triggers.msg_queue import MessageQueueTrigger

    trigger = MessageQueueTrigger(scheme="eventhubs", **_trigger_kwargs(setup))
    return asyncio.run(_first(trigger.run(), 60))


def run_await_sensor(setup: Setup) -> Any:
    """The deferred sensor: its trigger in the triggerer (here, this process), then ``execute_complete``."""
    from airflow_provider_eh.sensors.await_event import EventHubAwaitEventSensor
    from airflow_provider_eh.triggers.event import EventHubAwaitEventTrigger

    sensor = EventHubAwaitEventSensor(task_id="wait", eventhub_name=setup.hub, consumer_group=setup.group,
                                      checkpoint_container=setup.container, start_at="earliest",
                                      event_hubs_conn_id=setup.eh_conn, wasb_conn_id=setup.wasb_conn, timeout=30)
    trigger = EventHubAwaitEventTrigger(**_trigger_kwargs(setup), start_at="earliest", deadline=time.time() + 30)
    event = asyncio.run(_first(trigger.run(), 60))
    return sensor.execute_complete(_context(), event.payload)  # type: ignore[arg-type]


def run_checkpoint_sensor(setup: Setup) -> Any:
    from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor
    from airflow_provider_eh.triggers.checkpoint import EventHubCheckpointTrigger

    sensor = EventHubCheckpointSensor(task_id="wait", checkpoint_container=setup.container, consumer_groups=setup.group,
                                      targets={"0": 5}, eventhub_name=setup.hub, event_hubs_conn_id=setup.eh_conn,
                                      wasb_conn_id=setup.wasb_conn, timeout=30, deferrable=True)
    trigger = EventHubCheckpointTrigger(targets={"0": 5}, consumer_groups=[setup.group], container=setup.container,
                                        eventhub_name=setup.hub, event_hubs_conn_id=setup.eh_conn,
                                        wasb_conn_id=setup.wasb_conn,
                                        poll_interval=0.5, deadline=time.time() + 30)
    event = asyncio.run(_first(trigger.run(), 60))
    return sensor.execute_complete(_context(), event.payload)  # type: ignore[arg-type]


def run_checkpoint_poke(setup: Setup) -> Any:
    """The sensor in poke mode: its first poke, in the worker."""
    from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor

    sensor = EventHubCheckpointSensor(task_id="wait", checkpoint_container=setup.container, consumer_groups=setup.group,
                                      targets={"0": 5}, eventhub_name=setup.hub, event_hubs_conn_id=setup.eh_conn,
                                      wasb_conn_id=setup.wasb_conn, timeout=30, poke_interval=1, deferrable=False)
    return sensor.poke(_context())  # type: ignore[arg-type]


def run_readback(setup: Setup) -> Any:
    """Reading the hub back (what a publish in doubt does, and ``airflow_provider_eh.testing``'s counts) on the
    endpoint the hook read: its errors name the connection the endpoint came from."""
    from airflow_provider_eh.hooks.event_hubs import EventHubHook

    endpoint = EventHubHook(setup.eh_conn).get_endpoint(setup.hub)
    return read_hub(endpoint, setup.group)


def run_view(setup: Setup) -> Any:
    """The Event Hubs view's read of the hub's partitions (its API answers with the error's message and status)."""
    from airflow_provider_eh.plugins.readers.partitions import partition_properties
    from airflow_provider_eh.plugins.readers.reading import Reading, Source

    return partition_properties(Reading(Source(event_hubs_conn_id=setup.eh_conn, eventhub_name=setup.hub)))


def run_ingest(setup: Setup, **options: Any) -> Any:
    from airflow_provider_eh.operators.ingest import EventHubIngestOperator

    operator = EventHubIngestOperator(
        task_id="ingest", table="events", sql_conn_id=setup.sink_conn, columns=["id"], event_hubs_conn_id=setup.eh_conn,
        eventhub_name=setup.hub, consumer_group=setup.group, wasb_conn_id=setup.wasb_conn,
        checkpoint_container=setup.container,
        max_wait_time=0.3, max_duration=30, stall_timeout=10, **options)
    return operator.execute(_context())  # type: ignore[arg-type]


RUNNERS: dict[str, Callable[[Setup], Any]] = {
    "publish": run_publish, "test_connection": run_test_connection, "event_trigger": run_event_trigger,
    "queue": run_queue, "await_sensor": run_await_sensor, "checkpoint_sensor": run_checkpoint_sensor,
    "ingest": run_ingest, "checkpoint_poke": run_checkpoint_poke, "readback": run_readback, "view": run_view,
}


def attempt(path: str, setup: Setup) -> Outcome:
    """Run ``path``; what it raised (the test fails when it did not raise)."""
    started = time.monotonic()
    try:
        result = RUNNERS[path](setup)
    except _Reported as exc:
        return Outcome(str(exc), "n/a", time.monotonic() - started)
    except BaseException as exc:  # noqa: BLE001 - what the user would see, whatever it is
        return Outcome(f"{type(exc).__name__}: {exc}", _retry_class(exc), time.monotonic() - started)
    raise AssertionError(f"{path} did not fail: {result!r}")


# ---- what landed ----------------------------------------------------------------------------------

def landed_events(setup: Setup) -> list[str]:
    return [json.loads(e.body)["id"] for e in read_hub(setup.reader)]


def checkpoint_blobs(s: Services, setup: Setup) -> list[str]:
    service = BlobServiceClient.from_connection_string(s.azurite.connection_string)
    container = service.get_container_client(setup.container)
    return [b.name for b in container.list_blobs()] if container.exists() else []


def sink_rows(db: FilePath) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])


# ---- the services (module-scoped) ----------------------------------------------------------------

@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    with EmulatorProcess(tmp_path_factory.mktemp("secured"), extra_args=["--require-auth", "--fsync", "never"],
                         key_name=KEY_NAME, key=KEY, sas_rules=RULES) as proc:
        yield proc


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Certificates, Certificates]:
    """The gateway's CA and certificate, and another CA (a bundle that does not match)."""
    base = tmp_path_factory.mktemp("certs")
    return make_certificates(base / "gateway"), make_certificates(base / "other")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory,
            certificates: tuple[Certificates, Certificates]) -> Iterator[EmulatorProcess]:
    certs = certificates[0]
    with EmulatorProcess(tmp_path_factory.mktemp("gateway"), tls=(certs.cert, certs.key),
                         extra_args=["--require-auth", "--fsync", "never"], key_name=KEY_NAME, key=KEY) as proc:
        yield proc


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpProxy]:
    with HttpProxy(tmp_path_factory.mktemp("proxy"), PROXY_USER, PROXY_PASSWORD) as running:
        yield running


REFUSE_CONNECT = '''
from proxy.http.exception import HttpRequestRejected
from proxy.http.proxy import HttpProxyBasePlugin


class RefuseConnect(HttpProxyBasePlugin):
    """A company proxy's rule: no CONNECT tunnel to this host (403 Forbidden)."""

    def before_upstream_connection(self, request):
        if request.is_https_tunnel:
            raise HttpRequestRejected(status_code=403, reason=b"Forbidden")
        return request
'''


@pytest.fixture(scope="module")
def refusing_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpProxy]:
    """A real proxy (``proxy.py``) whose rule refuses every CONNECT tunnel with 403, as a company proxy refuses
    a port or host it does not allow (the plugin is a file in the proxy's working directory)."""
    directory = tmp_path_factory.mktemp("refusing-proxy")
    (directory / "refuse_connect.py").write_text(REFUSE_CONNECT)
    with HttpProxy(directory, extra_args=("--plugins", "refuse_connect.RefuseConnect")) as refusing:
        yield refusing


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---- the matrix -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def services(secured: Any, gateway: Any, proxy: Any, refusing_proxy: Any, closed_port: int, certificates: Any,
             azurite: Any) -> Services:
    return Services(secured=secured, gateway=gateway, proxy=proxy, refusing_proxy=refusing_proxy,
                    closed_port=closed_port, certificates=certificates, azurite=azurite)


def make_sink(path: FilePath) -> FilePath:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE events (id TEXT NOT NULL)")
    return path


def check_outcome(cell: Cell, setup: Setup, outcome: Outcome) -> None:
    missing = [part for part in map(setup.fill, cell.says) if part not in outcome.message]
    assert not missing, f"{cell.id}: the message lacks {missing}: {outcome.message}"
    leaked = [secret for secret in SECRETS + setup.secrets if secret and secret in outcome.message]
    assert not leaked, f"{cell.id}: the message shows a secret: {outcome.message}"
    want = "n/a" if cell.path == "test_connection" else cell.retry
    assert outcome.retry == want, f"{cell.id}: retry class {outcome.retry}, expected {want}: {outcome.message}"
    assert outcome.seconds <= cell.within, f"{cell.id}: took {outcome.seconds:.1f} s, bound {cell.within} s"


def what_landed(cell: Cell, setup: Setup, s: Services) -> list[str]:
    """What the path left behind that it should not have: events sent, checkpoints written, rows loaded."""
    if cell.path == "publish" and not setup.hub.startswith("no-such-hub"):
        return [f"event {i}" for i in landed_events(setup)]
    if cell.path in ("event_trigger", "queue", "await_sensor", "checkpoint_sensor", "checkpoint_poke"):
        return [f"checkpoint {b}" for b in checkpoint_blobs(s, setup)]
    if cell.path == "ingest" and setup.sink is not None:
        return [f"{sink_rows(setup.sink)} rows"] if sink_rows(setup.sink) else []
    return []


def seed(setup: Setup, events: int = 6) -> None:
    """``events`` events in partition 0 of the cell's hub (through the right connection): readers have something to
    read."""
    from azure.eventhub import EventData

    with setup.reader.producer() as producer:
        batch = producer.create_batch(partition_id="0")
        for i in range(events):
            event = EventData(json.dumps({"id": f"seed-{i}"}))
            try:
                batch.add(event)
            except ValueError:  # full: send it, go on in a new one
                producer.send_batch(batch)
                batch = producer.create_batch(partition_id="0")
                batch.add(event)
        producer.send_batch(batch)


WARM = ("airflow.sdk", "airflow.providers.common.compat.sdk", "airflow.providers.common.messaging.triggers.msg_queue",
        "airflow.providers.common.sql.hooks.sql", "airflow.providers.sqlite.hooks.sqlite",
        "airflow_provider_eh.operators.publish", "airflow_provider_eh.operators.ingest",
        "airflow_provider_eh.sensors.await_event", "airflow_provider_eh.sensors.checkpoint",
        "airflow_provider_eh.triggers.event", "airflow_provider_eh.triggers.checkpoint", "airflow_provider_eh.queues",
        "azure.eventhub.aio", "azure.storage.blob.aio", "aiohttp")
MID_RUN = ("server_busy", "endpoint_gone_mid_send", "hub_deleted_mid_run", "consumer_group_deleted_mid_run")
PLAIN = [c for c in CELLS if c.fault not in MID_RUN and c.path != "spark_publish"]
READERS = ("ingest", "event_trigger", "queue", "await_sensor", "checkpoint_sensor", "checkpoint_poke", "readback", "view")


@pytest.fixture(scope="module")
def matrix(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Setup, Outcome, list[str]]]]:
    """Every plain cell run at once, each on connections of its own (the faults wait on the network, not the
    CPU, so the matrix takes about as long as its slowest cells): ``{cell id: (setup, outcome, what landed)}``."""
    import importlib

    for module in WARM:  # imported here, once: Airflow's modules are not made to be first imported by threads at once
        importlib.import_module(module)
    sinks = tmp_path_factory.mktemp("sinks")
    setups = {}
    for n, cell in enumerate(PLAIN):
        setup = replace(make_fault(cell, services), name=f"c{n}", sink=make_sink(sinks / f"c{n}.db"))
        if cell.path in READERS and not setup.hub.startswith("no-such-hub"):
            seed(setup)
        setups[cell.id] = setup

    def run(cell: Cell) -> tuple[Setup, Outcome, list[str]]:
        setup = setups[cell.id]
        outcome = attempt(cell.path, setup)
        return setup, outcome, what_landed(cell, setup, services)

    with pytest.MonkeyPatch.context() as mp:
        for setup in setups.values():
            for name, value in setup.environ().items():
                mp.setenv(name, value)
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="cell") as pool:
            results = dict(zip([c.id for c in PLAIN], pool.map(run, PLAIN), strict=True))
        yield results


def _marked(cells: list[Cell]) -> list[Any]:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.gap)] if c.gap else []) for c in cells]


@pytest.mark.parametrize("cell", _marked(PLAIN))
def test_fault_on_path(cell: Cell, matrix: dict[str, tuple[Setup, Outcome, list[str]]]) -> None:
    setup, outcome, landed = matrix[cell.id]
    check_outcome(cell, setup, outcome)
    assert landed == [], f"{cell.id}: {landed[:5]} landed"


def _only(fault: str, request: pytest.FixtureRequest, path: str = "publish") -> Cell:
    """The cell of ``fault`` on ``path``; expected to fail when the cases name a gap."""
    (cell,) = [c for c in CELLS if c.fault == fault and c.path == path]
    if cell.gap:
        request.applymarker(pytest.mark.xfail(strict=True, reason=cell.gap))
    return cell


def test_server_busy_beyond_the_retries_is_retried_and_the_retry_publishes_once(
        services: Services, tmp_path: FilePath, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    cell = _only("server_busy", request)
    setup = replace(make_fault(cell, services), sink=make_sink(tmp_path / "sink.db"))
    for name, value in setup.environ().items():
        monkeypatch.setenv(name, value)
    services.secured.admin.set_fault("server_busy", hub=setup.hub)
    try:
        outcome = attempt("publish", setup)
    finally:
        services.secured.admin.clear_faults()
    check_outcome(cell, setup, outcome)
    assert landed_events(setup) == []
    run_publish(setup)  # the retry, the throttling over
    assert sorted(landed_events(setup)) == sorted(e["body"]["id"] for e in events_of(setup))


@pytest.fixture
def doomed(tmp_path: FilePath) -> Iterator[EmulatorProcess]:
    """An endpoint of the test's own, to be killed mid-send and started again on its ports."""
    with EmulatorProcess(tmp_path / "doomed", extra_args=["--fsync", "always"]) as proc:
        yield proc


def test_endpoint_gone_mid_send_is_retried_and_the_retry_publishes_each_event_once(
        doomed: EmulatorProcess, azurite: Any, tmp_path: FilePath, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    from airflow_provider_eh import steps

    cell = _only("endpoint_gone_mid_send", request)
    hub = unique_name("gone")
    doomed.admin.create_hub(hub, partitions=2)
    container = unique_name("c")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    conn_str = doomed.connection_string(hub)
    setup = Setup(eh={"connection_string": conn_str}, reader=EventHubsEndpoint.from_connection_string(conn_str, hub), hub=hub,
                  address=f"127.0.0.1:{doomed.port}", wasb={"connection_string": azurite.connection_string}, container=container,
                  sink=make_sink(tmp_path / "sink.db"))
    for name, value in setup.environ().items():
        monkeypatch.setenv(name, value)

    def kill(step: str, count: int, detail: Any) -> None:
        if step == "mid_send" and count >= 1 and doomed.running:
            doomed.kill()

    stop = steps.observe(kill)
    try:
        started = time.monotonic()
        try:
            run_publish(setup, pad=200_000)
        except BaseException as exc:  # noqa: BLE001 - what the user sees
            outcome = Outcome(f"{type(exc).__name__}: {exc}", _retry_class(exc), time.monotonic() - started)
        else:
            raise AssertionError("the publish did not fail with its endpoint gone")
    finally:
        stop()
    check_outcome(cell, setup, outcome)
    doomed.restart()
    landed = landed_events(setup)
    assert 0 < len(landed) < EVENTS and len(landed) == len(set(landed))  # what was acknowledged, once
    run_publish(setup, pad=200_000)
    assert sorted(landed_events(setup)) == sorted(e["body"]["id"] for e in events_of(setup))


# ---- Spark: the sends on the executors ------------------------------------------------------------------

SPARK_MAPPING = {"body_column": "body", "partition_column": "partition_id", "property_columns": ("i",), "order_by": ("i",)}


def spark_rows(setup: Setup, directory: FilePath) -> str:
    """The cell's events as the Parquet output of an upstream Spark job (the columns :data:`SPARK_MAPPING` reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    events = events_of(setup)
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"body": [json.dumps(e["body"]) for e in events], "partition_id": [e["partition_id"] for e in events],
                             "i": list(range(len(events)))}), directory / "part-0.parquet")
    return str(directory)


def run_spark_publish(setup: Setup, rows: str) -> Any:
    from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

    operator = SparkToEventHubOperator(
        task_id="publish", path=rows, spark_conn_id=f"spark_{setup.name}", event_hubs_conn_id=setup.eh_conn,
        eventhub_name=setup.hub, wasb_conn_id=setup.wasb_conn, state_container=setup.container, producer_group="matrix",
        claim_timeout=0, **SPARK_MAPPING)
    return operator.execute(_context())  # type: ignore[arg-type]


#: when each mid-run fault is made: once the task has claimed the partitions and written their intents (the next
#: thing is the send: on Spark, the fault meets the executors, not the driver), or once ingestion committed a batch
MADE_AT = {"server_busy": "after_intent", "hub_deleted_mid_run": "after_intent",
           "consumer_group_deleted_mid_run": "ingest_committed"}


def make_mid_run(fault: str, setup: Setup, s: Services) -> None:
    if fault == "server_busy":
        s.secured.admin.set_fault("server_busy", hub=setup.hub)
    elif fault == "hub_deleted_mid_run":
        s.secured.admin.delete_hub(setup.hub)
    elif fault == "consumer_group_deleted_mid_run":
        s.secured.admin.delete_consumer_group(setup.hub, setup.group)
    else:
        raise AssertionError(f"no way to make {fault!r} mid-run")


def attempt_with(cell: Cell, setup: Setup, s: Services, run: Callable[[], Any]) -> Outcome:
    """``run()`` with the cell's fault made at its step (:data:`MADE_AT`; from the start when it has none)."""
    from airflow_provider_eh import steps

    when = MADE_AT.get(cell.fault)
    made: list[str] = []

    def make(step: str, count: int, detail: Any) -> None:
        if step == when and not made:
            made.append(step)
            make_mid_run(cell.fault, setup, s)

    stop = steps.observe(make)
    started = time.monotonic()
    try:
        run()
    except BaseException as exc:  # noqa: BLE001 - what the user sees
        return Outcome(f"{type(exc).__name__}: {exc}", _retry_class(exc), time.monotonic() - started)
    else:
        raise AssertionError(f"{cell.id}: the path did not fail")
    finally:
        stop()
        s.secured.admin.clear_faults()
        assert made or when is None, f"{cell.id}: the path never reached {when}"


def recreate_and_publish_again(cell: Cell, setup: Setup, s: Services, publish: Callable[[], Any]) -> None:
    """After the fault: the hub created again (when it was deleted) and the task's retry, which lands each event once."""
    if cell.fault == "hub_deleted_mid_run":
        s.secured.admin.create_hub(setup.hub, partitions=2, consumer_groups=[GROUP])
    publish()
    assert sorted(landed_events(setup)) == sorted(e["body"]["id"] for e in events_of(setup)), cell.id


SPARK_CELLS = [c for c in CELLS if c.path == "spark_publish"]


@pytest.mark.parametrize("cell", _marked(SPARK_CELLS))
def test_fault_on_spark_executors(cell: Cell, spark: Any, services: Services, tmp_path: FilePath,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's sends run on the executors; what they meet comes back as data and is mapped on the driver, at the
    task's connection: the same words and retry class as the local path, nothing landed, and once the fault is over
    the retry publishes each event once."""
    setup = replace(make_fault(cell, services), name="spark")
    rows = spark_rows(setup, tmp_path / "rows")
    for name, value in setup.environ().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(*connection_env(f"spark_{setup.name}", "spark", host="local[2]"))
    outcome = attempt_with(cell, setup, services, lambda: run_spark_publish(setup, rows))
    check_outcome(cell, setup, outcome)
    if cell.fault != "hub_deleted_mid_run":
        assert landed_events(setup) == [], f"{cell.id}: events landed"
    if cell.fault in MADE_AT:
        recreate_and_publish_again(cell, setup, services, lambda: run_spark_publish(setup, rows))


@pytest.mark.parametrize("cell", _marked([c for c in CELLS if c.fault == "hub_deleted_mid_run" and c.path == "publish"]))
def test_hub_deleted_mid_publish(cell: Cell, services: Services, tmp_path: FilePath, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub deleted once the partitions are claimed: the send fails naming the hub, without retries (the service
    said not-found); the hub created again, the retry lands each event once."""
    setup = replace(make_fault(cell, services), name="deleted", sink=make_sink(tmp_path / "sink.db"))
    for name, value in setup.environ().items():
        monkeypatch.setenv(name, value)
    outcome = attempt_with(cell, setup, services, lambda: run_publish(setup))
    check_outcome(cell, setup, outcome)
    recreate_and_publish_again(cell, setup, services, lambda: run_publish(setup))


@pytest.mark.parametrize("cell", _marked([c for c in CELLS if c.fault == "consumer_group_deleted_mid_run"]))
def test_consumer_group_deleted_mid_ingest(cell: Cell, services: Services, tmp_path: FilePath,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The group deleted after the first batch committed, with far more to read than the links receive ahead:
    ingestion fails naming the group, without retries; the batches committed before stay loaded once."""
    setup = replace(make_fault(cell, services), name="group", sink=make_sink(tmp_path / "sink.db"))
    seed(setup, SEEDED)
    for name, value in setup.environ().items():
        monkeypatch.setenv(name, value)
    outcome = attempt_with(cell, setup, services, lambda: run_ingest(setup, batch_size=50))
    check_outcome(cell, setup, outcome)
    with sqlite3.connect(setup.sink) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM events")]
    assert ids and len(ids) == len(set(ids)) and len(ids) < SEEDED, len(ids)  # what committed, once; not all of it


SEEDED = 20_000
