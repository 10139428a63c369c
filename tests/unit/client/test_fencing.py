"""The idempotent-producer link's pure parts: ids, numbering bounds, annotations as the SDK encodes them."""

from __future__ import annotations

import pytest

from airflow_provider_eh.client.fencing import (
    MAX_OWNER_LEVEL,
    MAX_SEQUENCE,
    PRODUCER_SEQUENCE,
    FencedLink,
    fenced_error,
    open_fenced,
    producer_group_id,
)
from airflow_provider_eh.errors import FencingRangeError, ProducerDisconnectedError


def test_producer_group_ids_are_stable_48_bit_and_differ_per_group() -> None:
    ids = {producer_group_id(f"dag.task{i}") for i in range(1000)}
    assert len(ids) == 1000 and all(0 <= i < 2**48 for i in ids)
    assert producer_group_id("orders.publish") == producer_group_id("orders.publish")


def test_numbering_continues_after_the_hubs_answer_and_refuses_to_pass_32_bits() -> None:
    link = FencedLink("3", 7, 2, last_sequence=41)
    assert [link.take(), link.take()] == [42, 43]
    near = FencedLink("3", 7, 2, last_sequence=MAX_SEQUENCE - 10)
    near.reserve(10)
    with pytest.raises(FencingRangeError, match="partition 3: .* new producer_group. Nothing was sent"):
        near.reserve(11)


@pytest.mark.parametrize("seq", [0, 1, 127, 128, 300, 70_000, MAX_SEQUENCE])
def test_annotation_bytes_are_the_sdks_encoding(seq: int) -> None:
    from azure.eventhub import EventData

    from airflow_provider_eh.client.sdk_internals import sdk_encode

    link = FencedLink("0", producer_group_id("g"), 300, -1)
    event = EventData(b"body")
    event.raw_amqp_message.annotations.update(link.annotations(seq))
    encoded = link.annotation_bytes(seq)
    assert bytes(sdk_encode(event)).startswith(encoded) and encoded.startswith(b"\x00\x53\x72")
    from azure.eventhub._pyamqp._encode import VALUE

    assert link.annotations(seq)[PRODUCER_SEQUENCE][VALUE] == seq

def test_an_owner_level_beyond_16_bits_is_refused_before_any_connection() -> None:
    with pytest.raises(FencingRangeError, match=f"owner level {MAX_OWNER_LEVEL + 1} of producer group 'g'.*new producer_group"):
        open_fenced(object(), "0", group="g", owner_level=MAX_OWNER_LEVEL + 1)


def test_only_the_hubs_epoch_refusal_reads_as_fenced() -> None:
    fenced = fenced_error(RuntimeError("Error condition: com.microsoft:producer-epoch-stolen; owner level 3 below 4"))
    assert isinstance(fenced, ProducerDisconnectedError) and "fenced at the hub" in str(fenced)
    assert fenced_error(RuntimeError("amqp:connection:forced")) is None
