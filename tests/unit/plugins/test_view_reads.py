"""What one view request reads, and what requests share: each connection read once, partition properties
shared for a moment between tabs, the first unprocessed event's time read once per checkpoint position."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from airflow.models.connection import Connection
from airflow.sdk import BaseHook

from airflow_provider_eh.plugins.readers import lag, partitions
from airflow_provider_eh.plugins.readers.consumers import consumer_groups
from airflow_provider_eh.plugins.readers.lag import first_unprocessed_times
from airflow_provider_eh.plugins.readers.partitions import partition_properties
from airflow_provider_eh.plugins.readers.reading import Reading, Source

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=timezone.utc)
EH = "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=send;SharedAccessKey=EhKey-reads-test;UseDevelopmentEmulator=true"
BLOB = ("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=QmxvYktleS1yZWFkcy10ZXN0;"
        "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;")


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    for cache in (partitions._PROPERTIES, partitions._PARTITION_IDS, lag._FIRST_UNPROCESSED, lag._UNREADABLE):
        cache.clear()


def test_a_request_reads_each_connection_once_however_many_readers_use_it(monkeypatch: pytest.MonkeyPatch) -> None:
    conns = {
        "eh": Connection(conn_id="eh", conn_type="azure_event_hubs", extra=json.dumps({"connection_string": EH})),
        "blob": Connection(conn_id="blob", conn_type="wasb", extra=json.dumps({"connection_string": BLOB})),
        "sink": Connection(conn_id="sink", conn_type="sqlite", host=":memory:"),
    }
    reads: list[str] = []

    def get_connection(cls: Any, conn_id: str) -> Connection:
        reads.append(conn_id)
        return conns[conn_id]

    monkeypatch.setattr(BaseHook, "get_connection", classmethod(get_connection))
    reading = Reading(Source("eh", "orders", "blob", "state", "checkpoints", sql_conn_id="sink"))
    for _ in range(3):
        assert reading.endpoint.eventhub_name == "orders"
        reading.container("state")
        reading.container("checkpoints")
        reading.connection("sink")
    assert sorted(reads) == ["blob", "eh", "sink"]
    assert {"EhKey-reads-test", "QmxvYktleS1yZWFkcy10ZXN0"} <= reading.secrets


@dataclass
class Endpoint:
    """An endpoint whose producer clients answer management requests from a table, counting them."""

    partitions: dict[str, dict[str, Any]]
    fully_qualified_namespace: str = "127.0.0.1:5672"
    eventhub_name: str = "orders"
    requests: list[str] = field(default_factory=list)

    def producer(self, **_: Any) -> Any:
        endpoint = self

        class Client:
            def __enter__(self) -> Client:
                return self

            def __exit__(self, *exc: object) -> None:
                pass

            def get_eventhub_properties(self) -> dict[str, Any]:
                endpoint.requests.append("hub")
                return {"partition_ids": list(endpoint.partitions)}

            def get_partition_properties(self, pid: str) -> dict[str, Any]:
                endpoint.requests.append(pid)
                return endpoint.partitions[pid]

        return Client()


def _reading(endpoint: Endpoint, **source: Any) -> Reading:
    reading = Reading(Source("eh", **source))
    reading.__dict__["endpoint"] = endpoint  # the connection is not what is under test here
    return reading


def _props(last: int) -> dict[str, Any]:
    return {"beginning_sequence_number": 0, "last_enqueued_sequence_number": last, "last_enqueued_time_utc": NOW}


def test_tabs_refreshing_together_share_one_read_of_the_partition_properties(monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = Endpoint({str(p): _props(p) for p in range(4)})
    first = partition_properties(_reading(endpoint))
    assert partition_properties(_reading(endpoint)) == first  # another tab, within PROPERTIES_TTL
    assert sorted(endpoint.requests) == ["0", "1", "2", "3", "hub"]
    monkeypatch.setattr(partitions._PROPERTIES, "ttl", 0.0)
    partition_properties(_reading(endpoint))
    assert sorted(endpoint.requests) == ["0", "0", "1", "1", "2", "2", "3", "3", "hub"]  # partition ids kept longer
    assert first["3"] == {"beginning_sequence_number": 0, "last_enqueued_sequence_number": 3,
                          "last_enqueued_time": NOW.isoformat()}


@dataclass
class Blob:
    name: str
    metadata: dict[str, str]
    last_modified: datetime = NOW - timedelta(seconds=5)
    etag: str = "e"


class Container:
    container_name = "checkpoints"

    def __init__(self, blobs: list[Blob]):
        self.blobs = blobs

    def list_blobs(self, name_starts_with: str = "", **_: Any) -> list[Blob]:
        return [b for b in self.blobs if b.name.startswith(name_starts_with)]


def test_only_lagging_partitions_are_probed_once_per_checkpoint_position(monkeypatch: pytest.MonkeyPatch) -> None:
    probed: list[tuple[str, int]] = []
    enqueued = {("1", 4): NOW - timedelta(minutes=30), ("2", -1): NOW - timedelta(hours=2)}

    def probe(endpoint: Any, group: str, position: tuple[str, int], timeout: float) -> datetime | None:
        assert group == "lag-reader"
        probed.append(position)
        return enqueued[position]

    monkeypatch.setattr(lag, "_probe", probe)
    cp = "127.0.0.1:5672/orders/{group}/checkpoint/{pid}"
    container = Container([
        Blob(cp.format(group="analytics", pid=0), {"sequencenumber": "9"}),
        Blob(cp.format(group="analytics", pid=1), {"sequencenumber": "4"}),
        Blob(cp.format(group="reporting", pid=1), {"sequencenumber": "4"}),
        Blob(cp.format(group="reporting", pid=0), {"sequencenumber": "9"}),
    ])
    props = {pid: {"last_enqueued_sequence_number": 9} for pid in ("0", "1", "2")}
    reading = _reading(Endpoint({}), checkpoint_container="checkpoints", lag_consumer_group="lag-reader")
    monkeypatch.setattr(reading, "container", lambda name: container)
    groups = consumer_groups(reading, props, NOW)
    assert sorted(probed) == [("1", 4), ("2", -1)]  # p0 is caught up; p1's position is shared by both groups
    rows = {g["consumer_group"]: {r["partition"]: (r["lag_events"], r["lag_seconds"]) for r in g["partitions"]} for g in groups}
    assert rows == {"analytics": {"0": (0, 0.0), "1": (5, 1800.0), "2": (10, 7200.0)},
                    "reporting": {"0": (0, 0.0), "1": (5, 1800.0), "2": (10, 7200.0)}}
    consumer_groups(reading, props, NOW + timedelta(seconds=5))
    assert len(probed) == 2  # the enqueued time of an event never changes: read once


def test_a_slow_read_does_not_hold_the_answer_and_fills_in_a_later_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    release, calls = threading.Event(), []

    def probe(endpoint: Any, group: str, position: tuple[str, int], timeout: float) -> datetime | None:
        calls.append(position)
        release.wait(10)
        return None if position[0] == "1" else NOW - timedelta(minutes=1)

    monkeypatch.setattr(lag, "_probe", probe)
    endpoint = Endpoint({})
    started = time.monotonic()
    assert first_unprocessed_times(endpoint, "$Default", [("0", 4), ("1", 4)], wait=0.2) == {("0", 4): None, ("1", 4): None}
    assert time.monotonic() - started < 2
    assert first_unprocessed_times(endpoint, "$Default", [("0", 4)], wait=0.2) == {("0", 4): None}
    release.set()
    deadline = time.monotonic() + 10
    while lag._PROBING and time.monotonic() < deadline:
        time.sleep(0.05)
    again = first_unprocessed_times(endpoint, "$Default", [("0", 4), ("1", 4)], wait=0.2)
    assert again == {("0", 4): NOW - timedelta(minutes=1), ("1", 4): None}
    assert sorted(calls) == [("0", 4), ("1", 4)]  # one read each: in flight, then remembered (or, unread, left for a while)
