"""The partition readers against the local endpoint, through the real SDK: one receiving thread over
several partitions, and the per-partition ``receive_batch`` fallback, deliver the same events."""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest
from azure.eventhub import EventData, EventHubProducerClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.partition_readers import STOP, PartitionReader, PartitionsReader


def _send(conn_str: str, per_partition: dict[str, int]) -> None:
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        for p, count in per_partition.items():
            producer.send_batch([EventData(f"{p}-{i}") for i in range(count)], partition_id=p)


def _collect(sink: queue.Queue[Any], wanted: dict[str, int], timeout: float = 60) -> dict[str, list[str]]:
    """Bodies per partition until each has ``wanted`` events; fails on an error item or a timeout."""
    got: dict[str, list[str]] = {p: [] for p in wanted}
    deadline = time.monotonic() + timeout
    while any(len(got.get(p, [])) < n for p, n in wanted.items()):
        p, item = sink.get(timeout=max(0.1, deadline - time.monotonic()))
        assert item is not STOP, f"partition {p} ended after {len(got.get(p, []))} events"
        if isinstance(item, BaseException):
            raise item
        got.setdefault(p, []).extend(b"".join(e.body).decode() for e in item)
    return got


@pytest.mark.parametrize("direct", [None, False], ids=["one-thread", "receive-batch-per-partition"])
def test_each_partition_is_read_after_its_own_start_in_order(event_hubs: Any, hub: str, direct: bool | None) -> None:
    conn_str = event_hubs.connection_string(hub)
    _send(conn_str, {"0": 30, "1": 7, "2": 12})
    sink: queue.Queue[Any] = queue.Queue(maxsize=4)
    reader = PartitionsReader(
        EventHubsEndpoint.from_connection_string(conn_str), "$Default", {"0": 9, "1": -1, "2": 11},
        sink=sink, max_batch_size={"0": 5, "1": 100, "2": 100}, max_wait_time=0.5, direct=direct,
    ).start()
    try:
        got = _collect(sink, {"0": 20, "1": 7})
    finally:
        reader.close(wait=True)
    assert got["0"] == [f"0-{i}" for i in range(10, 30)]  # after seq 9, in order, in batches of 5 at most
    assert got["1"] == [f"1-{i}" for i in range(7)]
    assert got.get("2", []) == []  # started after its last event: nothing


def test_a_closed_partition_stops_while_the_others_go_on(event_hubs: Any, hub: str) -> None:
    conn_str = event_hubs.connection_string(hub)
    _send(conn_str, {"0": 5, "1": 5})
    sink: queue.Queue[Any] = queue.Queue(maxsize=8)
    reader = PartitionsReader(
        EventHubsEndpoint.from_connection_string(conn_str), "$Default", {"0": -1, "1": -1},
        sink=sink, max_batch_size=5, max_wait_time=0.3,
    ).start()
    try:
        _collect(sink, {"0": 5, "1": 5})
        reader.close_partition("0")
        _send(conn_str, {"0": 3, "1": 3})
        got = _collect(sink, {"1": 3})
        # drain what is left for a while: nothing of partition 0 arrives after its close was taken
        late: list[Any] = []
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            try:
                p, item = sink.get(timeout=0.2)
            except queue.Empty:
                continue
            if p == "0" and isinstance(item, list) and item:
                late.extend(item)
    finally:
        reader.close(wait=True)
    assert got["1"] == ["1-0", "1-1", "1-2"]
    assert late == []


def test_an_unknown_partition_is_reported_as_an_error_then_ended(event_hubs: Any, hub: str) -> None:
    conn_str = event_hubs.connection_string(hub)
    reader = PartitionReader(EventHubsEndpoint.from_connection_string(conn_str), "$Default", "9", -1, max_wait_time=0.3)
    with pytest.raises(Exception) as raised:
        for _ in reader.batches():
            pass
    assert "9" in str(raised.value)


def test_events_converted_from_amqp_messages_equal_those_converted_from_eventdata(event_hubs: Any, hub: str) -> None:
    """The one-thread reader builds events from the decoded messages; the fallback from the SDK's EventData."""
    conn_str = event_hubs.connection_string(hub)
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        for p in ("0", "1"):
            batch = producer.create_batch(partition_id=p)
            for i in range(60):
                event = EventData(("ü" * i).encode() if i % 2 else bytes(range(i % 256)))
                event.properties = {"eh.seq": i, "eh.group": "g", "n": i * 1.5, "flag": bool(i % 3), "raw": b"\xff" * (i % 4)}
                batch.add(event)
            producer.send_batch(batch)

    def read(direct: bool | None) -> dict[str, list[tuple[str, Any]]]:
        sink: queue.Queue[Any] = queue.Queue(maxsize=8)
        reader = PartitionsReader(
            EventHubsEndpoint.from_connection_string(conn_str), "$Default", {"0": -1, "1": 9}, sink=sink,
            max_batch_size=25, max_wait_time=0.5, direct=direct, convert=lambda p, fields: (p, fields),
        ).start()
        got: dict[str, list[tuple[str, Any]]] = {"0": [], "1": []}
        try:
            while len(got["0"]) < 60 or len(got["1"]) < 50:
                p, item = sink.get(timeout=60)
                assert item is not STOP and not isinstance(item, BaseException), item
                got[p].extend(item)
        finally:
            reader.close(wait=True)
        return got

    fast, through_eventdata = read(None), read(False)
    assert [f.sequence_number for _, f in fast["1"]] == list(range(10, 60))
    assert fast == through_eventdata
    assert fast["0"][3][1].properties == {"eh.seq": 3, "eh.group": "g", "n": 4.5, "flag": False, "raw": "////"}
