"""Metrics end to end: a real publish task run by ``dag.test()`` in a fresh process, with Airflow's own metrics
turned on, sends the provider's metrics to a StatsD socket and to an OpenTelemetry (OTLP/HTTP) receiver
that the test runs; the counts received are those of the events read back from the hub.

Cheap on purpose: one small hub, six events on two partitions, one run per exporter.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from publish_kit import REPO

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import read_hub
from airflow_provider_eh.testing.dag_test import failure_report

DAG_FILE = '''
import os
from datetime import datetime, timezone

from airflow.sdk import DAG

from airflow_provider_eh.operators.publish import EventHubPublishOperator

with DAG(dag_id="publish_metrics", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=timezone.utc)) as dag:
    EventHubPublishOperator(
        task_id="publish",
        events=[{"body": {"id": i}, "partition_id": "0" if i < 4 else "1"} for i in range(6)],
        state_container=os.environ["EH_STATE_CONTAINER"],
        producer_group="metrics-test",
    )
'''

RUN_DAG_TEST = """
import importlib.util, json, sys
from datetime import datetime
spec = importlib.util.spec_from_file_location("publish_metrics", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
run = module.dag.test(logical_date=datetime.fromisoformat(sys.argv[2]))
print(json.dumps({"state": str(run.state), "ti": str(run.get_task_instance("publish").state)}))
"""

SENT = "airflow.eventhubs.publish.events.sent"
PUBLISHED = "airflow.eventhubs.publish.batches.published"
DURATION = "airflow.eventhubs.publish.duration"
LEDGER = "airflow.eventhubs.ledger.duration"


def run_publish(tmp_path: Path, container: str, metrics_env: dict[str, str]) -> None:
    """One ``dag.test()`` of the publish DAG in a child process with ``metrics_env`` added; fails on a failed run."""
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "publish_metrics.py").write_text(textwrap.dedent(DAG_FILE))
    env = {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "EH_STATE_CONTAINER": container, **metrics_env,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", RUN_DAG_TEST, str(dags / "publish_metrics.py"), "2026-03-01T00:00:00+00:00"],
                         capture_output=True, text=True, timeout=240, env=env)
    output = run.stdout + run.stderr
    result = [line for line in run.stdout.splitlines() if line.startswith('{"state": ')]
    assert run.returncode == 0 and result, failure_report(output)
    assert json.JSONDecoder().raw_decode(result[-1])[0] == {"state": "success", "ti": "success"}, failure_report(output)


def landed(event_hubs: Any, hub: str) -> dict[str, int]:
    """Events per partition, read back from the hub."""
    endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
    return dict(Counter(event.partition for event in read_hub(endpoint)))


# -- StatsD --------------------------------------------------------------------------------------


@pytest.fixture
def statsd_socket() -> Iterator[socket.socket]:
    """A UDP socket on a free 127.0.0.1 port: the StatsD server Airflow sends to."""
    assert importlib.util.find_spec("statsd"), "the statsd client is missing: make test installs requirements/dev.lock"
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    yield sock
    sock.close()


def statsd_lines(sock: socket.socket) -> list[tuple[str, dict[str, str], float, str]]:
    """``(name, tags, value, type)`` of every datagram received so far (InfluxDB-style tags after the name)."""
    out = []
    while True:
        try:
            datagram = sock.recv(65536).decode()
        except BlockingIOError:
            return out
        for line in datagram.splitlines():
            head, _, rest = line.rpartition(":")
            value, _, kind = rest.partition("|")
            name, *tags = head.split(",")
            out.append((name, dict(tag.split("=", 1) for tag in tags), float(value), kind.split("|")[0]))


def test_a_publish_task_sends_its_metrics_to_statsd_with_their_tags(
    airflow_db: Path, connections: dict[str, str], container: str, event_hubs: Any, statsd_socket: socket.socket,
    tmp_path: Path,
) -> None:
    run_publish(tmp_path, container, {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(statsd_socket.getsockname()[1]),
        "AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED": "True",  # tags on the name; plain StatsD has none
    })
    lines = statsd_lines(statsd_socket)
    hub = connections["hub"]
    sent = {tags["partition"]: value for name, tags, value, kind in lines if name == SENT and kind == "c"}
    assert sent == {"0": 4, "1": 2} == landed(event_hubs, hub)
    assert {(tags["hub"], tags["producer_group"]) for name, tags, *_ in lines if name == SENT} == {(hub, "metrics-test")}
    assert sorted(tags["partition"] for name, tags, value, _ in lines if name == PUBLISHED and value == 1) == ["0", "1"]
    assert [(tags, kind) for name, tags, _, kind in lines if name == DURATION] == [
        ({"hub": hub, "producer_group": "metrics-test"}, "ms")]
    # the ledger's operations on each partition's blob state: claim, is the batch committed, the intent, the
    # committed records, the commit, the release
    ledger = Counter((tags["partition"], tags["operation"]) for name, tags, _, kind in lines if name == LEDGER and kind == "ms"
                     and tags["backend"] == "blob" and (tags["hub"], tags["producer_group"]) == (hub, "metrics-test"))
    assert ledger == {(p, op): 2 if op == "write" else 1 for p in ("0", "1")
                      for op in ("claim", "lookup", "write", "record", "release")}
    assert not [name for name, *_ in lines if name.startswith("airflow.eventhubs.") and name[8:] not in _metric_names()]


def _metric_names() -> set[str]:
    from airflow_provider_eh.metrics import METRICS

    return set(METRICS)


# -- OpenTelemetry -------------------------------------------------------------------------------


class OtlpReceiver(ThreadingHTTPServer):
    """An OTLP/HTTP metrics endpoint on a free 127.0.0.1 port: keeps each export request's body."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        super().__init__(("127.0.0.1", 0), _OtlpHandler)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/metrics"


class _OtlpHandler(BaseHTTPRequestHandler):
    server: OtlpReceiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.server.bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def otlp_points(bodies: list[bytes]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The last value of each ``(metric, attributes)`` in the export requests (sums are cumulative); a
    histogram's value is its count."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    points: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for body in bodies:
        request = ExportMetricsServiceRequest.FromString(body)
        for scope in (s for r in request.resource_metrics for s in r.scope_metrics):
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                for point in getattr(metric, kind).data_points:
                    attributes = tuple(sorted((a.key, a.value.string_value) for a in point.attributes))
                    value = point.count if kind in ("histogram", "exponential_histogram") else (
                        point.as_int if point.WhichOneof("value") == "as_int" else point.as_double)
                    points[(metric.name, attributes)] = value
    return points


def test_a_publish_task_sends_its_metrics_to_an_opentelemetry_collector(
    airflow_db: Path, connections: dict[str, str], container: str, event_hubs: Any, otlp_receiver: OtlpReceiver,
    tmp_path: Path,
) -> None:
    run_publish(tmp_path, container, {
        "AIRFLOW__METRICS__OTEL_ON": "True",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": otlp_receiver.endpoint,
        "OTEL_METRIC_EXPORT_INTERVAL": "1000",  # the last export is the exit's flush
    })
    points = otlp_points(otlp_receiver.bodies)
    hub = connections["hub"]
    tags = (("hub", hub), ("producer_group", "metrics-test"))
    sent = {dict(attrs)["partition"]: value for (name, attrs), value in points.items() if name == SENT}
    assert sent == {"0": 4, "1": 2} == landed(event_hubs, hub)
    assert {attrs for (name, attrs) in points if name == SENT} == {
        tuple(sorted((*tags, ("partition", p)))) for p in ("0", "1")}
    assert points[(DURATION, tuple(sorted(tags)))] == 1  # one publish timed
