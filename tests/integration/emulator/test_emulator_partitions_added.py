"""A hub's partition count raised while it is in use, as on a Premium or Dedicated namespace: the SDK sees the new
partitions, they start empty and take events, the old ones keep theirs, the count never goes down, and it holds
across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from azure.eventhub import EventData, EventHubProducerClient
from eventhubs_local import EmulatorAdminError, EmulatorProcess


def test_partitions_added_to_a_hub_in_use_start_empty_and_last_across_a_restart(tmp_path: Path) -> None:
    with EmulatorProcess(tmp_path / "data", extra_args=["--fsync", "never"]) as endpoint:
        endpoint.admin.create_hub("orders", partitions=2)
        with EventHubProducerClient.from_connection_string(endpoint.connection_string("orders")) as producer:
            producer.send_batch([EventData("before")], partition_id="1")
            assert endpoint.admin.add_partitions("orders", 4)["partitions"] == 4
            properties = producer.get_eventhub_properties()
            assert properties["partition_ids"] == ["0", "1", "2", "3"]
            assert producer.get_partition_properties("3")["is_empty"] is True
            assert producer.get_partition_properties("1")["last_enqueued_sequence_number"] == 0
        # the SDK's producer keeps the partition ids it found at its first send: a new client sends to the new ones
        with EventHubProducerClient.from_connection_string(endpoint.connection_string("orders")) as producer:
            producer.send_batch([EventData("after")], partition_id="3")
            assert producer.get_partition_properties("3")["last_enqueued_sequence_number"] == 0

        with pytest.raises(EmulatorAdminError) as lower:
            endpoint.admin.add_partitions("orders", 3)
        assert lower.value.status == 409 and "only grow" in str(lower.value)
        for bad in ("8", 2000):  # not a count, or past the service's limit
            with pytest.raises(EmulatorAdminError) as invalid:
                endpoint.admin.add_partitions("orders", bad)  # type: ignore[arg-type]
            assert invalid.value.status == 400 and "invalid partition count" in str(invalid.value)
        with pytest.raises(EmulatorAdminError) as missing:
            endpoint.admin.add_partitions("no-such-hub", 8)
        assert missing.value.status == 404

        endpoint.restart()
        assert endpoint.admin.hub("orders")["partitions"] == 4 and endpoint.admin.hub("orders")["events"] == 2
