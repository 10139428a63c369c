"""Spark output published through executors on ``local[2]`` and read back with the SDK: each row once,
on its key's partition, with its properties, in the declared order; re-runs send nothing."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from spark_kit import SparkSetup, batch, write_orders

from airflow_provider_eh.errors import BatchContentChangedError
from airflow_provider_eh.publishing import partition_for_key

PARTITIONS = ["0", "1", "2", "3"]


def connections(setup: SparkSetup) -> int:
    """Connections the local endpoint has accepted so far."""
    return int(setup.event_hubs.admin.stats()["connections_total"])


def test_200k_rows_land_once_on_their_key_partition_with_properties_in_declared_order(spark: Any, setup: SparkSetup) -> None:
    path = write_orders(spark, str(setup.tmp / "orders"), 200_000)
    results = setup.publish(spark, path, batch("scale"))
    assert sum(r.events for r in results.values()) == 200_000
    assert {r.status for r in results.values()} == {"published"}
    assert {r.fencing for r in results.values()} == {"hub"}  # the executors sent on idempotent-producer links

    read = setup.read_back()
    rows = [json.loads(e.body) for e in read]
    counts = Counter(r["id"] for r in rows)
    assert len(counts) == 200_000 and set(counts.values()) == {1}
    for event, row in zip(read, rows):
        assert event.partition == partition_for_key(row["customer"], PARTITIONS)
        assert event.properties["region"] == row["region"] == row["id"] % 7
    for pid in PARTITIONS:
        ids = [row["id"] for event, row in zip(read, rows) if event.partition == pid]
        seqs = [int(event.properties["eh.seq"]) for event in read if event.partition == pid]
        assert ids == sorted(ids), f"partition {pid}: events not in the declared order"
        assert seqs == list(range(len(ids)))
        assert results[pid].events == len(ids)


def test_republishing_same_output_sends_nothing_and_changed_output_needs_a_new_generation(
    spark: Any, setup: SparkSetup
) -> None:
    path = write_orders(spark, str(setup.tmp / "orders"), 4000)
    before = connections(setup)
    first = setup.publish(spark, path, batch("rerun"))
    # the driver's one connection for the whole publish, and one per Python worker that ran sends
    # (local[2]: at most two at once, kept between tasks), not one per request, link and task
    assert connections(setup) - before <= 1 + 2
    ends = setup.ends()
    before = connections(setup)
    again = setup.publish(spark, path, batch("rerun"))
    assert connections(setup) - before == 1  # nothing to send: the driver's connection alone
    assert {r.status for r in again.values()} == {"already_committed"}
    assert {p: r.sequence_range() for p, r in again.items()} == {p: r.sequence_range() for p, r in first.items()}
    assert setup.ends() == ends, "a re-run of the same interval sent events"

    changed = write_orders(spark, str(setup.tmp / "changed"), 4000, start=1)
    with pytest.raises(BatchContentChangedError, match="bump `generation`"):
        setup.publish(spark, changed, batch("rerun"))
    assert setup.ends() == ends
    bumped = setup.publish(spark, changed, batch("rerun", generation=1))
    assert {r.status for r in bumped.values()} == {"published"}
    ids = Counter(json.loads(e.body)["id"] for e in setup.read_back())
    assert len(ids) == 4001 and ids[0] == 1 and ids[4000] == 1 and sum(ids.values()) == 8000
