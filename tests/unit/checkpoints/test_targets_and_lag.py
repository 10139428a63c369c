"""Targets come in the shapes DAG authors pass; lag and "reached" compare sequence numbers only."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from airflow_provider_eh.checkpoints.blob_layout import Checkpoint, ConsumerGroupCheckpoints, Ownership
from airflow_provider_eh.checkpoints.lag import PartitionLag, describe_lags, partition_lags
from airflow_provider_eh.sensors.checkpoint import parse_targets

PUBLISH_XCOM = {
    "0": {"events": 10, "first_seq": 0, "last_seq": 9, "service_last_sequence_number": 9},
    "1": {"events": 5, "first_seq": 20, "last_seq": 24, "service_last_sequence_number": 26},
    "2": {"events": 0, "first_seq": None, "last_seq": None, "service_last_sequence_number": None},
}


def test_plain_targets_are_normalised_to_string_partitions_and_ints() -> None:
    assert parse_targets({0: 5, "1": "7"}) == {"0": 5, "1": 7}


def test_publish_xcom_waits_on_the_service_sequence_number_and_drops_partitions_without_events() -> None:
    assert parse_targets(PUBLISH_XCOM) == {"0": 9, "1": 26}


def test_last_seq_is_used_when_the_service_sequence_number_is_absent() -> None:
    assert parse_targets({"3": {"events": 2, "first_seq": 4, "last_seq": 5}}) == {"3": 5}


def test_outputs_of_mapped_publish_tasks_merge_to_the_highest_target_per_partition() -> None:
    assert parse_targets([{"0": 3, "1": 8}, {"0": 5}, None]) == {"0": 5, "1": 8}


@pytest.mark.parametrize(
    "rendered",
    ['{"0": 5, "1": 7}', "{'0': 5, '1': 7}", "{'0': {'events': 1, 'first_seq': 5, 'last_seq': 5, 'service_last_sequence_number': 5}, '1': 7}"],
)
def test_rendered_template_text_is_parsed(rendered: str) -> None:
    assert parse_targets(rendered) == {"0": 5, "1": 7}


@pytest.mark.parametrize("empty", [None, "", "None", "  "])
def test_no_targets_means_none(empty: str | None) -> None:
    assert parse_targets(empty) is None


@pytest.mark.parametrize("bad", ["not a dict {", {"0": "abc"}, {"0": 1.5}, {"0": True}, 42])
def test_malformed_targets_are_rejected_naming_the_value(bad: object) -> None:
    with pytest.raises(ValueError, match="target|targets"):
        parse_targets(bad)


def test_reached_exactly_when_the_checkpoint_is_at_or_past_the_target() -> None:
    assert not PartitionLag("cg", "0", target=10, checkpoint=None).reached
    assert not PartitionLag("cg", "0", target=10, checkpoint=9).reached
    assert PartitionLag("cg", "0", target=10, checkpoint=10).reached
    assert PartitionLag("cg", "0", target=10, checkpoint=11).reached
    assert PartitionLag("cg", "0", target=-1, checkpoint=None).reached  # empty partition: nothing to wait for


def test_lag_is_last_enqueued_minus_checkpoint_and_counts_a_missing_checkpoint_as_minus_one() -> None:
    assert PartitionLag("cg", "0", target=10, checkpoint=6, last_enqueued=12).lag == 6
    assert PartitionLag("cg", "0", target=10, checkpoint=6, last_enqueued=12).remaining == 4
    assert PartitionLag("cg", "0", target=10, checkpoint=None, last_enqueued=12).lag == 13
    assert PartitionLag("cg", "0", target=10, checkpoint=None).remaining == 11
    assert PartitionLag("cg", "0", target=10, checkpoint=6).lag is None


def test_partition_lags_pair_each_consumer_group_with_each_target_and_its_owner() -> None:
    since = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    group = ConsumerGroupCheckpoints(
        "ns", "hub", "analytics", "c",
        checkpoints={"0": Checkpoint("0", 9, None, since, "b0"), "1": Checkpoint("1", 20, "x", since, "b1")},
        ownership={"0": Ownership("0", "owner-a", since, "e", "o0"), "1": Ownership("1", "", since, "e", "o1")},
    )
    empty = ConsumerGroupCheckpoints("ns", "hub", "$Default", "c")

    lags = partition_lags({"0": 9, "1": 26}, [group, empty], {"0": 9, "1": 30})

    assert [(x.consumer_group, x.partition_id, x.reached, x.lag) for x in lags] == [
        ("analytics", "0", True, 0),
        ("analytics", "1", False, 10),
        ("$Default", "0", False, 10),
        ("$Default", "1", False, 31),
    ]
    assert lags[0].owner_id == "owner-a" and lags[0].owned_since == since.isoformat()
    assert lags[1].owner_id is None  # released ownership reads as unowned
    assert PartitionLag.from_dict(lags[1].to_dict()) == lags[1]
    text = describe_lags(lags)
    assert "consumer group 'analytics': partition 0: checkpoint 9, target 9 (reached)" in text
    assert "partition 1: checkpoint 20, target 26 (6 to go), last enqueued 30, lag 10, unowned" in text
    assert "consumer group '$Default': partition 0: checkpoint none" in text
