"""The Event Hubs event trigger's pure logic: serialisation, the filter by dotted path, batching, payloads, bad arguments."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_eh.errors import EventTriggerConfigError
from airflow_provider_eh.triggers.batches import gather_batches
from airflow_provider_eh.triggers.event import EventHubAwaitEventTrigger, EventHubEventTrigger
from airflow_provider_eh.triggers.filters import load_filter
from airflow_provider_eh.triggers.partition_stream import receive_error
from airflow_provider_eh.triggers.payload import batch_payload, ranges_of
from airflow_provider_eh.triggers.producer import read_summary

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


def test_batch_window_is_batch_seconds_old_spelling_and_old_serialized_triggers_still_read() -> None:
    from airflow.exceptions import AirflowProviderDeprecationWarning

    from airflow_provider_eh.triggers.producer import HubReading

    with pytest.warns(AirflowProviderDeprecationWarning, match=r"batch_window=\.\.\.\) is deprecated and will be "
                                                               r"removed in 2\.0\.0; pass batch_seconds"):
        old = EventHubEventTrigger(**ARGS, batch_window=2.5)
    new = EventHubEventTrigger(**ARGS, batch_seconds=2.5)
    assert old.serialize() == new.serialize() and new.serialize()[1]["batch_seconds"] == 2.5
    assert "batch_window" not in new.serialize()[1]
    assert HubReading.from_kwargs({**ARGS, "batch_window": 4.0}).batch_seconds == 4.0  # kwargs stored before the rename
    assert HubReading.from_kwargs(new.serialize()[1]).batch_seconds == 2.5
    with pytest.warns(AirflowProviderDeprecationWarning), pytest.raises(EventTriggerConfigError, match="disagree"):
        EventHubEventTrigger(**ARGS, batch_window=1.0, batch_seconds=2.0)
    with pytest.raises(EventTriggerConfigError, match="batch_seconds must be a positive number"):
        EventHubEventTrigger(**ARGS, batch_seconds=0)


def test_await_trigger_serialises_its_deadline_and_is_never_shared() -> None:
    trigger = EventHubAwaitEventTrigger(**ARGS, deadline=123.0, checkpoint=True, start_after={0: 5},
                                        start_enqueued_after=1700000000.5)
    _, kwargs = trigger.serialize()
    assert EventHubAwaitEventTrigger(**kwargs).serialize()[1] == kwargs
    assert kwargs["deadline"] == 123.0 and kwargs["checkpoint"] is True and trigger.shared_stream_key() is None
    assert kwargs["start_after"] == {"0": 5} and kwargs["start_enqueued_after"] == 1700000000.5


@pytest.mark.parametrize(
    "message",
    [
        # the local endpoint, through the SDK
        "The messaging entity 'orders/ConsumerGroups/nope' could not be found. (404)\nError condition: amqp:not-found",
        # the service
        "The messaging entity 'sb://ns.servicebus.windows.net/orders/consumergroups/nope' could not be found. "
        "To know more visit https://aka.ms/sbResourceMgrExceptions. TrackingId:1, SystemTracker:x, Timestamp:y",
    ],
)
def test_a_missing_consumer_group_is_a_config_error_naming_hub_group_and_what_to_do(message: str) -> None:
    from azure.eventhub.exceptions import ConnectionLostError

    error = receive_error(ConnectionLostError(message), "orders", "nope", "2")
    assert isinstance(error, EventTriggerConfigError) and not error.retryable
    assert str(error).startswith("Event Hub 'orders' has no consumer group 'nope' (partition 2: The messaging entity")
    assert "create the consumer group on the hub" in str(error) and "or fix consumer_group" in str(error)


def test_other_receive_errors_stay_as_they_are() -> None:
    from azure.eventhub.exceptions import ConnectionLostError

    lost = ConnectionLostError("connection reset by peer")
    assert receive_error(lost, "orders", "g", "0") is lost


def test_the_read_summary_names_where_each_partition_began_and_ended() -> None:
    from datetime import datetime, timezone

    since = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert read_summary({"0": -1, "10": 4, "2": since}, {"0": 7, "10": 4, "2": -1}) == (
        "partition 0: from seq -1 to 7, partition 2: from enqueued time 2026-01-02T03:04:05+00:00 to -1, "
        "partition 10: from seq 4 to 4"
    )
    assert read_summary({}, {}) == "nothing (no partition opened)"


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


class ScriptedHub:
    """
    A ``get(timeout)`` on a clock of its own: delivers ``(delay, item)`` in order, each ``delay`` after
    the previous one, by moving the clock instead of sleeping (batching is timed on this clock alone).
    """

    def __init__(self, items: list[tuple[float, Any]]):
        self.now = 0.0
        self.items = list(items)

    def clock(self) -> float:
        return self.now

    async def get(self, timeout: float) -> Any:
        await asyncio.sleep(0)
        if not self.items or self.items[0][0] > timeout:
            if self.items:
                self.items[0] = (self.items[0][0] - timeout, self.items[0][1])
            self.now += timeout
            return None
        delay, item = self.items.pop(0)
        self.now += delay
        return item


def _collect(hub: ScriptedHub, size: int, window: float, count: int,
             read_to: dict[str, int] | None = None) -> list[tuple[float, list]]:
    """The first ``count`` batches as ``(clock time handed over, [(partition, seq), ...])``."""

    async def run() -> list[tuple[float, list]]:
        out = []
        async for batch in gather_batches(hub.get, read_to if read_to is not None else {}, size, window, clock=hub.clock):
            out.append((hub.now, [(r["partition"], r["sequence_number"]) for r in batch]))
            if len(out) == count:
                return out
        return out

    return asyncio.run(asyncio.wait_for(run(), timeout=10))


def test_a_full_batch_fires_at_once_and_the_rest_waits_for_the_window() -> None:
    events = [FakeEvent(s) for s in range(5)]
    batches = _collect(ScriptedHub([(0.0, ("0", events))]), size=3, window=0.4, count=2)
    assert [b for _, b in batches] == [[("0", 0), ("0", 1), ("0", 2)], [("0", 3), ("0", 4)]]
    assert batches[0][0] == 0.0  # the full batch did not wait
    assert batches[1][0] == pytest.approx(0.4)  # the partial one waited for the window, started at the full one


def test_the_window_starts_at_a_batchs_first_event_and_spans_partitions() -> None:
    hub = ScriptedHub([(0.2, ("0", [FakeEvent(10)])), (0.1, ("1", [FakeEvent(7)])), (0.5, ("0", [FakeEvent(11)]))])
    batches = _collect(hub, size=100, window=0.3, count=2)
    assert [b for _, b in batches] == [[("0", 10), ("1", 7)], [("0", 11)]]
    assert batches[0][0] == pytest.approx(0.5)  # 0.2 (its first event) + the window, not 0.3 after the idle start
    assert batches[1][0] == pytest.approx(1.1)  # 0.8 + the window


def test_events_delivered_again_after_a_reconnect_are_dropped() -> None:
    hub = ScriptedHub([(0.0, ("0", [FakeEvent(4), FakeEvent(5)]))])
    batches = _collect(hub, size=10, window=0.1, count=1, read_to={"0": 4})
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
