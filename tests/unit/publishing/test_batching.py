"""Both fast ways of filling an SDK batch build exactly the batch ``EventDataBatch.add`` builds:
the one-encode ``add_event`` and the stamped-message bytes of ``wire`` through ``add_encoded``."""

from __future__ import annotations

from azure.eventhub import EventData
from azure.eventhub._common import EventDataBatch

from airflow_provider_eh.publishing.batching import add_encoded, add_event, fast_path_available
from airflow_provider_eh.publishing.wire import StampedMessageEncoder, StampEncoder


def fill(mode: str) -> list[EventDataBatch]:
    """600 stamped events, half with a property, in 64 KiB batches: ``sdk``, ``one_encode`` or ``wire``."""
    stamps = StampEncoder("group", "0123456789abcdef", 3)
    encoder = StampedMessageEncoder.create("group", "0123456789abcdef", 3)
    batches = [EventDataBatch(max_size_in_bytes=64 * 1024, partition_id="0")]

    def add(batch: EventDataBatch, body: bytes, props: dict | None, seq: int) -> None:
        if mode == "wire":
            add_encoded(batch, encoder.encode(body, props, seq))
            return
        event = EventData(body)
        event.properties = stamps.properties(props, seq)
        add_event(batch, event, mode == "one_encode" and fast_path_available(batch))

    for i in range(600):
        body, props = b"x" * (i % 300), ({"k": i} if i % 2 else None)
        try:
            add(batches[-1], body, props, i)
        except ValueError:
            batches.append(EventDataBatch(max_size_in_bytes=64 * 1024, partition_id="0"))
            add(batches[-1], body, props, i)
    return batches


def test_fast_paths_are_available_and_byte_identical_to_sdk_add() -> None:
    assert fast_path_available(EventDataBatch(partition_id="0"))
    assert StampedMessageEncoder.create("group", "0123456789abcdef", 3) is not None
    public = fill("sdk")
    assert len(public) > 2
    for mode in ("one_encode", "wire"):
        fast = fill(mode)
        assert len(fast) == len(public), mode
        for a, b in zip(fast, public):
            assert (a.size_in_bytes, len(a)) == (b.size_in_bytes, len(b)), mode
            assert [bytes(m) for m in a._message[5]] == [bytes(m) for m in b._message[5]], mode
