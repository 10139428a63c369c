"""The reader's positions and admission control: what a micro-batch may take from each partition."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from airflow_provider_eh.errors import DataSourceOptionError
from airflow_provider_eh.spark.datasource.offsets import PartitionState, check_offset, fair_shares, plan_end, resolve
from airflow_provider_eh.spark.datasource.positions import EARLIEST, LATEST, SEQUENCE, TIME, parse_position, parse_positions
from airflow_provider_eh.spark.datasource.read_options import ReadOptions

CONN = "Endpoint=sb://localhost:5672/;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true"


def hub(**ends: tuple[int, int]) -> dict[str, PartitionState]:
    return {p.lstrip("p"): PartitionState(p.lstrip("p"), b, e) for p, (b, e) in ends.items()}


def test_positions_as_text_and_as_the_scala_connectors_json() -> None:
    assert parse_position("earliest", "x").kind == EARLIEST
    assert parse_position("@latest", "x").kind == LATEST
    assert parse_position('{"offset": "-1", "seqNo": -1, "enqueuedTime": null, "isInclusive": true}', "x").kind == EARLIEST
    seq = parse_position('{"offset": null, "seqNo": 7, "enqueuedTime": null, "isInclusive": false}', "x")
    assert (seq.kind, seq.sequence_number, seq.inclusive) == (SEQUENCE, 7, False)
    when = parse_position('{"enqueuedTime": "2026-05-01T00:00:00Z"}', "x")
    assert (when.kind, when.enqueued_time) == (TIME, datetime(2026, 5, 1, tzinfo=UTC))
    assert parse_position("1777593600000", "x").sequence_number == 1777593600000  # a bare number is a sequence number
    keyed = parse_positions(json.dumps({json.dumps({"ehName": "orders", "partitionId": 3}): {"seqNo": 1}}), "orders", "p")
    assert list(keyed) == ["3"]
    with pytest.raises(DataSourceOptionError, match="names hub 'other'"):
        parse_positions(json.dumps({json.dumps({"ehName": "other", "partitionId": 3}): "earliest"}), "orders", "p")
    with pytest.raises(DataSourceOptionError, match="offset '12345': only '-1'"):
        parse_position('{"offset": "12345"}', "x")
    with pytest.raises(DataSourceOptionError, match="negative"):
        parse_position('{"seqNo": -5}', "x")


def test_sequence_positions_resolve_inclusive_and_exclusive_for_starts_and_ends() -> None:
    state = PartitionState("0", 10, 50)
    assert resolve(parse_position("earliest", "x"), state, start=True) == 10
    assert resolve(parse_position("latest", "x"), state, start=True) == 50
    assert resolve(parse_position('{"seqNo": 20}', "x"), state, start=True) == 20
    assert resolve(parse_position('{"seqNo": 20, "isInclusive": false}', "x"), state, start=True) == 21
    assert resolve(parse_position('{"seqNo": 20}', "x"), state, start=False) == 21
    assert resolve(parse_position('{"seqNo": 20, "isInclusive": false}', "x"), state, start=False) == 20


def test_admission_control_caps_each_partition_and_the_total_fairly() -> None:
    states = hub(p0=(0, 100), p1=(0, 5), p2=(0, 40))
    start = {"0": 10, "1": 0, "2": 0}
    assert plan_end(start, states) == {"0": 100, "1": 5, "2": 40}
    assert plan_end(start, states, max_per_partition=20) == {"0": 30, "1": 5, "2": 20}
    assert plan_end(start, states, max_total=35) == {"0": 25, "1": 5, "2": 15}  # 5 all, then 15 each
    assert sum(fair_shares({"0": 90, "1": 5, "2": 40}, 36).values()) == 36
    assert plan_end(start, states, max_total=0) == start


def test_new_partitions_start_at_their_beginning_and_available_now_stops_at_its_target() -> None:
    states = hub(p0=(0, 10), p1=(3, 8))
    assert plan_end({"0": 4}, states) == {"0": 10, "1": 8}
    assert plan_end({"0": 4}, states, max_total=4) == {"0": 6, "1": 5}
    assert plan_end({"0": 4}, states, target={"0": 7}) == {"0": 7, "1": 3}  # added after the query started: not read
    assert plan_end({"0": 4, "9": 2}, states) == {"0": 10, "1": 8, "9": 2}  # a partition the hub no longer lists
    assert plan_end({"0": 4}, states, bounds={"0": 6}) == {"0": 6, "1": 8}  # an ending position bounds its partition
    assert plan_end({"0": 4}, states, target={"0": 9, "1": 8}, bounds={"0": 6}) == {"0": 6, "1": 8}
    with pytest.raises(ValueError, match="partition 0 has offset 'x'"):
        check_offset({"0": "x"}, "the start")


def test_read_options_name_what_is_wrong_and_take_the_scala_names() -> None:
    opts = ReadOptions.from_options({"connectionString": CONN, "eventHubName": "orders",
                                     "eventhubs.consumerGroup": "spark", "maxEventsPerTrigger": "500",
                                     "eventhubs.startingPositions": json.dumps({"1": {"seqNo": 4}})})
    assert (opts.consumer_group, opts.max_events_per_trigger, opts.start_of("1").sequence_number) == ("spark", 500, 4)
    assert opts.start_of("0").kind == EARLIEST and opts.end_of("0").kind == LATEST
    with pytest.raises(DataSourceOptionError, match="no hub to read from"):
        ReadOptions.from_options({})
    with pytest.raises(DataSourceOptionError, match="option 'maxEventsPerTrigger' is '0': give 1 or more"):
        ReadOptions.from_options({"connectionString": CONN, "eventHubName": "h", "maxEventsPerTrigger": "0"})
    with pytest.raises(DataSourceOptionError, match="'checkpointContainer' is missing"):
        ReadOptions.from_options({"connectionString": CONN, "eventHubName": "h", "checkpointConnectionString": CONN})
    with pytest.raises(DataSourceOptionError, match="option 'decodeErrors' is 'skip'"):
        ReadOptions.from_options({"connectionString": CONN, "eventHubName": "h", "schema": "{}", "schemaFormat": "Json",
                                  "decodeErrors": "skip"})
