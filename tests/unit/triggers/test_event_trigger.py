"""The Event Hubs event trigger's pure logic: serialisation, the filter by dotted path, batching, payloads, bad arguments."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_eh.triggers.event import (
    EventHubAwaitEventTrigger,
    EventHubEventTrigger,
    EventTriggerConfigError,
    batch_payload,
    gather_batches,
    load_filter,
    ranges_of,
)

ARGS = {"eventhub_name": "orders", "consumer_group": "airflow", "checkpoint_container": "cp"}


def only_paid(record: dict[str, Any]) -> bool:
    """A filter the tests name by dotted path."""
    return record["properties"].get("type") == "paid"


@dataclass
class FakeEvent:
    """The fields of an SDK ``EventData`` the trigger reads."""

    sequence_number: int
    body: bytes = b"{}"
    offset: str = "0"
    properties: dict[Any, Any] = field(default_factory=dict)
    enqueued_time: Any = None


def test_serialisation_round_trips_every_argument() -> None:
    trigger = EventHubEventTrigger(
        **ARGS, partition_ids=[0, "1"], filter=f"{__name__}.only_paid", batch_size=7, batch_window=2.5,
        start_at="latest", include_bodies=True, max_body_bytes=100, namespace="ns.servicebus.windows.net",
        event_hubs_conn_id="eh", wasb_conn_id="blob",
    )
    path, kwargs = trigger.serialize()
    assert path == "airflow_provider_eh.triggers.event.EventHubEventTrigger"
    again = EventHubEventTrigger(**kwargs)
    assert again.serialize() == (path, kwargs)
    assert kwargs["partition_ids"] == ["0", "1"] and kwargs["batch_size"] == 7 and kwargs["filter"].endswith(".only_paid")
    assert trigger.shared_stream_key() == again.shared_stream_key()
    assert trigger.shared_stream_key() != EventHubEventTrigger(**{**kwargs, "batch_size": 8}).shared_stream_key()


def test_await_trigger_serialises_its_deadline_and_is_never_shared() -> None:
    trigger = EventHubAwaitEventTrigger(**ARGS, deadline=123.0, checkpoint=True)
    _, kwargs = trigger.serialize()
    assert EventHubAwaitEventTrigger(**kwargs).serialize()[1] == kwargs
    assert kwargs["deadline"] == 123.0 and kwargs["checkpoint"] is True and trigger.shared_stream_key() is None


def test_filter_by_dotted_path_and_colon_form() -> None:
    assert load_filter(f"{__name__}.only_paid") is only_paid
    assert load_filter(f"{__name__}:only_paid") is only_paid
    assert load_filter(None) is None
    trigger = EventHubEventTrigger(**ARGS, filter=f"{__name__}.only_paid")
    batch = [
        {"partition": "0", "sequence_number": s, "offset": str(s), "properties": {"type": t}, "body": "{}"}
        for s, t in ((3, "paid"), (4, "placed"), (5, "paid"))
    ]
    event = trigger._event({"namespace": "ns", "events": batch}, load_filter(trigger.filter))
    assert event.payload["partitions"] == {"0": {"first": 3, "last": 5, "count": 2, "sequence_numbers": [3, 5]}}
    assert trigger._event({"namespace": "ns", "events": batch[1:2]}, only_paid) is None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"filter": "no_such_module_xyz.keep"}, "module 'no_such_module_xyz' cannot be imported"),
        ({"filter": f"{__name__}.missing"}, f"module {__name__!r} has no function 'missing'"),
        ({"filter": "justaname"}, "is not a dotted path"),
        ({"consumer_group": ""}, "consumer_group is required"),
        ({"eventhub_name": ""}, "eventhub_name is required"),
        ({"checkpoint_container": None}, "checkpoint_container is required"),
        ({"batch_size": 0}, "batch_size must be at least 1"),
        ({"batch_window": 0}, "batch_window must be a positive number"),
        ({"start_at": "middle"}, "start_at must be one of earliest, latest"),
    ],
)
def test_bad_arguments_are_refused_with_what_to_fix(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(EventTriggerConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        EventHubEventTrigger(**{**ARGS, **bad})


def test_the_sensor_trigger_needs_a_container_only_to_checkpoint() -> None:
    EventHubAwaitEventTrigger(**{**ARGS, "checkpoint_container": None})
    with pytest.raises(EventTriggerConfigError, match="checkpoint=True needs a checkpoint_container"):
        EventHubAwaitEventTrigger(**{**ARGS, "checkpoint_container": None}, checkpoint=True)


def _scripted(items: list[tuple[float, Any]]):
    """A ``get(timeout)`` that delivers ``(delay, item)`` in order, then nothing."""
    queue = list(items)

    async def get(timeout: float) -> Any:
        if not queue:
            await asyncio.sleep(timeout)
            return None
        delay, item = queue[0]
        if delay > timeout:
            queue[0] = (delay - timeout, item)
            await asyncio.sleep(timeout)
            return None
        queue.pop(0)
        await asyncio.sleep(delay)
        return item

    return get


def _collect(get, size: int, window: float, count: int, read_to: dict[str, int] | None = None) -> list[tuple[float, list]]:
    async def run() -> list[tuple[float, list]]:
        out = []
        start = time.monotonic()
        async for batch in gather_batches(get, read_to if read_to is not None else {}, size, window):
            out.append((time.monotonic() - start, [(r["partition"], r["sequence_number"]) for r in batch]))
            if len(out) == count:
                return out
        return out

    return asyncio.run(asyncio.wait_for(run(), timeout=10))


def test_a_full_batch_fires_at_once_and_the_rest_waits_for_the_window() -> None:
    events = [FakeEvent(s) for s in range(5)]
    batches = _collect(_scripted([(0.0, ("0", events))]), size=3, window=0.4, count=2)
    assert [b for _, b in batches] == [[("0", 0), ("0", 1), ("0", 2)], [("0", 3), ("0", 4)]]
    assert batches[0][0] < 0.2  # the full batch did not wait
    assert batches[1][0] >= 0.35  # the partial one waited for the window


def test_the_window_starts_at_a_batchs_first_event_and_spans_partitions() -> None:
    get = _scripted([(0.0, ("0", [FakeEvent(10)])), (0.1, ("1", [FakeEvent(7)])), (0.5, ("0", [FakeEvent(11)]))])
    batches = _collect(get, size=100, window=0.3, count=2)
    assert [b for _, b in batches] == [[("0", 10), ("1", 7)], [("0", 11)]]
    assert 0.25 <= batches[0][0] < 0.5


def test_events_delivered_again_after_a_reconnect_are_dropped() -> None:
    get = _scripted([(0.0, ("0", [FakeEvent(4), FakeEvent(5)]))])
    batches = _collect(get, size=10, window=0.1, count=1, read_to={"0": 4})
    assert [b for _, b in batches] == [[("0", 5)]]


def test_payload_ranges_bodies_and_merging() -> None:
    records = [
        {"partition": p, "sequence_number": s, "offset": "0", "properties": {}, "body": "x" * 10}
        for p, s in (("0", 1), ("0", 2), ("1", 9))
    ]
    small = batch_payload(records, namespace="ns", eventhub="h", consumer_group="g", include_bodies=True, max_body_bytes=30)
    assert small["partitions"] == {"0": {"first": 1, "last": 2, "count": 2}, "1": {"first": 9, "last": 9, "count": 1}}
    assert [b["sequence_number"] for b in small["bodies"]] == [1, 2, 9] and small["events"] == 3
    big = batch_payload(records, namespace="ns", eventhub="h", consumer_group="g", include_bodies=True, max_body_bytes=29)
    assert "bodies" not in big and "exceed max_body_bytes=29" in big["bodies_omitted"]
    assert "bodies" not in batch_payload(records, namespace="ns", eventhub="h", consumer_group="g")
    later = {"payload": {"partitions": {"0": {"first": 3, "last": 8}}}}
    assert ranges_of([small, later]) == {"0": {"first": 1, "last": 8}, "1": {"first": 9, "last": 9}}
