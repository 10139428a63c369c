"""The one check of named partitions against the hub's, which the trigger, the sensor and ingestion share."""

from __future__ import annotations

import pytest

from airflow_provider_eh.client.partitions import check_partition_ids
from airflow_provider_eh.errors import EventTriggerConfigError, UnknownPartitionError

HUB = ["0", "1", "2", "3"]


def test_unknown_partitions_are_named_with_the_hubs_partitions_and_what_to_fix() -> None:
    with pytest.raises(UnknownPartitionError, match=r"^Event Hub 'orders' has no partition 7, 9 \(it has 0, 1, 2, 3\); "
                                                    r"fix partition_ids$"):
        check_partition_ids("orders", ["9", "1", "7"], HUB)


def test_the_caller_chooses_the_error_class() -> None:
    with pytest.raises(EventTriggerConfigError, match="has no partition 4"):
        check_partition_ids("orders", ["4"], HUB, EventTriggerConfigError)


def test_known_partitions_pass() -> None:
    check_partition_ids("orders", ["3", "0"], HUB)
    check_partition_ids("orders", [], HUB)
