"""The publish operators take ``lease_only_batch_bytes``, refuse it out of range when built, and return it."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from airflow_provider_eh.operators.publish import EventHubPublishOperator
from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator
from airflow_provider_eh.publishing import PartitionResult
from airflow_provider_eh.publishing.in_flight import DEFAULT_LEASE_ONLY_BATCH_BYTES


@pytest.mark.parametrize("make", [
    lambda **kw: EventHubPublishOperator(task_id="publish", events=[], **kw),
    lambda **kw: SparkToEventHubOperator(task_id="publish", path="/data", **kw),
], ids=["publish", "spark"])
def test_both_operators_refuse_a_bound_out_of_range_when_built_and_keep_a_good_one(make: object) -> None:
    with pytest.raises(ValueError, match=r"lease_only_batch_bytes=512: must be a whole number of bytes between 1024 "
                                         r"and 1048576 \(Event Hubs' 1 MiB batch limit\)"):
        make(lease_only_batch_bytes=512)  # type: ignore[operator]
    assert make().lease_only_batch_bytes == DEFAULT_LEASE_ONLY_BATCH_BYTES  # type: ignore[operator]
    assert make(lease_only_batch_bytes=65536).lease_only_batch_bytes == 65536  # type: ignore[operator]


def test_the_xcom_names_the_fence_and_the_bound_in_force_per_partition() -> None:
    operator = EventHubPublishOperator(task_id="publish", events=[])
    results = {
        "0": PartitionResult("0", 10, 0, 9, 9, "published", fencing="lease", lease_only_batch_bytes=65536),
        "1": PartitionResult("1", 10, 0, 9, 9, "already_committed", fencing="hub"),
    }
    xcom = operator.report("b" * 64, results)
    assert (xcom["0"]["fencing"], xcom["0"]["lease_only_batch_bytes"]) == ("lease", 65536)
    assert (xcom["1"]["fencing"], xcom["1"]["lease_only_batch_bytes"]) == ("hub", None)


def test_the_xcom_says_each_partitions_outcome_and_what_recovery_found() -> None:
    operator = EventHubPublishOperator(task_id="publish", events=[])
    results = {
        "0": PartitionResult("0", 10, 0, 9, 9, "recovered", landed_count=4, resent=6, readback_seconds=0.25),
        "1": PartitionResult("1", 5, 10, 14, 14, "published"),
    }
    xcom = operator.report("b" * 64, results)
    assert {k: xcom["0"][k] for k in ("status", "landed", "resent", "readback_seconds")} == {
        "status": "recovered", "landed": 4, "resent": 6, "readback_seconds": 0.25}
    assert {k: xcom["1"][k] for k in ("status", "landed", "resent", "readback_seconds")} == {
        "status": "published", "landed": 0, "resent": 0, "readback_seconds": None}


def test_a_state_backend_left_to_its_default_is_named_in_the_log_with_what_it_takes() -> None:
    with capture_logs() as logs:  # the operator's log is structlog's, as a task's
        assert EventHubPublishOperator(task_id="publish", events=[]).backend_in_force() == "variable"
    (warning,) = [e for e in logs if "state_backend" in e["event"]]
    assert warning["log_level"] == "warning"
    assert "Airflow Variables" in warning["event"] and "max_active_runs=1" in warning["event"]
    assert "state_container" in warning["event"]
    with capture_logs() as logs:  # chosen, either way: nothing to say
        assert EventHubPublishOperator(task_id="p", events=[], state_backend="variable").backend_in_force() == "variable"
        assert EventHubPublishOperator(task_id="p", events=[], state_container="states").backend_in_force() == "blob"
    assert [e for e in logs if "state_backend" in e["event"]] == []
