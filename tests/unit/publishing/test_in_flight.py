"""The lease-only bound as pure logic: its range, where it applies, and SDK batches filled under it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from azure.eventhub import EventDataBatch

from airflow_provider_eh.client.fencing import FencedLink
from airflow_provider_eh.errors import EventTooLargeError
from airflow_provider_eh.publishing import IdempotentPublisher, PartitionResult
from airflow_provider_eh.publishing.in_flight import (
    DEFAULT_LEASE_ONLY_BATCH_BYTES,
    MAX_LEASE_ONLY_BATCH_BYTES,
    MIN_LEASE_ONLY_BATCH_BYTES,
    batch_cap,
    bound_in_force,
    check_lease_only_batch_bytes,
)
from airflow_provider_eh.publishing.plan import PartitionPlan
from airflow_provider_eh.publishing.records import CommittedBatch
from airflow_provider_eh.publishing.sender import BatchFiller, BatchSender, Progress

LINK = 1024 * 1024


class _Client:
    """Builds real SDK batches (the link's size unless asked for less) and records each sent one's size."""

    def __init__(self, link_max: int = LINK):
        self.link_max = link_max
        self.sent: list[tuple[int, int, int]] = []  # (events, bytes, the batch's max size)

    def create_batch(self, partition_id: str, max_size_in_bytes: int | None = None) -> EventDataBatch:
        if max_size_in_bytes is not None and max_size_in_bytes > self.link_max:
            raise ValueError("max_size_in_bytes is greater than the link's")
        return EventDataBatch(max_size_in_bytes=max_size_in_bytes or self.link_max, partition_id=partition_id)

    def send_batch(self, batch: EventDataBatch, timeout: float) -> None:
        self.sent.append((len(batch), batch.size_in_bytes, batch.max_size_in_bytes))


def _fill(bound: int, bodies: list[bytes], fence: FencedLink | None = None, link_max: int = LINK) -> _Client:
    client = _Client(link_max)
    plan = PartitionPlan(group="g", partition_id="0", batch_id="b" * 64, owner_level=1, event_count=len(bodies),
                         fingerprint="f", action="send", lease_only_batch_bytes=bound)
    filler = BatchFiller(client, plan, BatchSender(client, send_timeout=1.0, stop_check=None, fenced=fence is not None),
                         Progress("w", time.monotonic()), fence)
    for seq, body in enumerate(bodies):
        filler.put(seq, body, {"i": seq}, seq)
    filler.finish()
    return client


@pytest.mark.parametrize("good", [MIN_LEASE_ONLY_BATCH_BYTES, 65536, DEFAULT_LEASE_ONLY_BATCH_BYTES, MAX_LEASE_ONLY_BATCH_BYTES])
def test_the_bound_takes_whole_bytes_from_1_kib_to_1_mib(good: int) -> None:
    assert check_lease_only_batch_bytes(good) == good


@pytest.mark.parametrize("bad", [0, 1023, MAX_LEASE_ONLY_BATCH_BYTES + 1, -1, True, 65536.0, "65536", None])
def test_a_bound_out_of_range_is_refused_naming_the_argument_and_the_range(bad: Any) -> None:
    with pytest.raises(ValueError) as refused:
        check_lease_only_batch_bytes(bad)
    text = str(refused.value)
    assert text.startswith(f"lease_only_batch_bytes={bad!r}: must be a whole number of bytes between 1024 and 1048576")
    assert "An event larger than the bound is sent alone" in text


def test_the_bound_applies_only_without_the_hubs_fencing_and_below_the_links_limit() -> None:
    assert batch_cap(65536, LINK, fenced_at_hub=False) == 65536
    assert batch_cap(65536, LINK, fenced_at_hub=True) is None
    assert batch_cap(LINK, LINK, fenced_at_hub=False) is None  # the link's own limit: no smaller batch asked for
    assert batch_cap(LINK, 256 * 1024, fenced_at_hub=False) is None  # a tier with smaller messages
    assert bound_in_force(65536, LINK, fenced_at_hub=False) == 65536
    assert bound_in_force(LINK, 256 * 1024, fenced_at_hub=False) == 256 * 1024
    assert bound_in_force(65536, LINK, fenced_at_hub=True) is None


def test_under_the_lease_every_sdk_batch_holds_at_most_the_bound() -> None:
    bound = 4096
    client = _fill(bound, [b"x" * 300] * 200)
    assert sum(n for n, _, _ in client.sent) == 200 and len(client.sent) > 1
    assert all(size <= bound and cap == bound for _, size, cap in client.sent), client.sent
    assert all(size > bound - 400 for _, size, _ in client.sent[:-1])  # filled up to it, not below


def test_an_event_larger_than_the_bound_goes_out_alone_between_batches_of_the_bound() -> None:
    bound = 2048
    client = _fill(bound, [b"a" * 300] * 3 + [b"b" * 5000] + [b"c" * 300] * 3)
    counts = [n for n, _, _ in client.sent]
    assert counts == [3, 1, 3], client.sent  # the small ones before it, it alone, the small ones after it
    assert client.sent[1][2] == LINK and client.sent[1][1] > bound  # alone, in a batch of the link's size
    assert client.sent[0][2] == client.sent[2][2] == bound


def test_an_event_larger_than_the_link_is_too_large_whatever_the_bound() -> None:
    with pytest.raises(EventTooLargeError, match="event 1 does not fit in one message"):
        _fill(2048, [b"a" * 100, b"b" * 9000], link_max=8192)


def test_under_the_hubs_fencing_batches_fill_to_the_links_limit() -> None:
    fence = FencedLink("0", producer_id=1, owner_level=1, last_sequence=-1)
    client = _fill(4096, [b"x" * 300] * 200, fence=fence)
    assert [(n, cap) for n, _, cap in client.sent] == [(200, LINK)]


def test_the_publisher_refuses_a_bound_out_of_range_when_built() -> None:
    with pytest.raises(ValueError, match="lease_only_batch_bytes=100: must be a whole number of bytes between"):
        IdempotentPublisher(object(), object(), producer_group="g", lease_only_batch_bytes=100)  # type: ignore[arg-type]


def test_the_result_and_the_ledger_record_carry_the_bound_and_old_records_read_without_it() -> None:
    assert PartitionResult("0", 1, 0, 0, 5, "published", fencing="lease",
                           lease_only_batch_bytes=65536).to_dict()["lease_only_batch_bytes"] == 65536
    record = CommittedBatch(3, 1, 3, 41, fencing="lease", batch_id="b", ordinal=0, lease_only_batch_bytes=65536)
    assert CommittedBatch.from_doc(record.to_doc()) == record
    hub = CommittedBatch(3, 1, 3, 41, fencing="hub", batch_id="b", ordinal=0)
    assert "lease_only_batch_bytes" not in hub.to_doc()  # records under the hub's fencing stay as they were
    old = {"events": 3, "first_seq": 1, "last_seq": 3, "service_last_sequence_number": 41, "fencing": "lease"}
    assert CommittedBatch.from_doc(old).lease_only_batch_bytes is None  # written before the bound existed
