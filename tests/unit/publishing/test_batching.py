"""The one-encode batch filler builds exactly the batch ``EventDataBatch.add`` builds."""

from __future__ import annotations

from azure.eventhub import EventData
from azure.eventhub._common import EventDataBatch

from airflow_provider_eh.publishing.batching import add_event, fast_path_available
from airflow_provider_eh.publishing.stamps import StampEncoder


def fill(fast: bool) -> list[EventDataBatch]:
    stamps = StampEncoder("group", "0123456789abcdef", 3)
    batches = [EventDataBatch(max_size_in_bytes=64 * 1024, partition_id="0")]
    for i in range(600):
        event = EventData(b"x" * (i % 300))
        event.properties = stamps.properties({"k": i} if i % 2 else None, i)
        try:
            add_event(batches[-1], event, fast and fast_path_available(batches[-1]))
        except ValueError:
            batches.append(EventDataBatch(max_size_in_bytes=64 * 1024, partition_id="0"))
            add_event(batches[-1], event, fast and fast_path_available(batches[-1]))
    return batches


def test_one_encode_path_is_available_and_byte_identical_to_sdk_add() -> None:
    assert fast_path_available(EventDataBatch(partition_id="0"))
    fast, public = fill(True), fill(False)
    assert len(fast) == len(public) > 2
    for a, b in zip(fast, public):
        assert (a.size_in_bytes, len(a)) == (b.size_in_bytes, len(b))
        assert list(a._message[5]) == list(b._message[5])
