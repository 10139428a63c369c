"""Row → event mapping, ordering hash and the executor passes, on Arrow batches without Spark."""

from __future__ import annotations

import datetime as dt
import decimal
import pickle

import pyarrow as pa
import pytest

from airflow_provider_eh.errors import EventTooLargeError, InvalidEventError
from airflow_provider_eh.publishing import fingerprint_of, normalise, partition_for_key
from airflow_provider_eh.publishing.plan import PartitionPlan
from airflow_provider_eh.spark import executor
from airflow_provider_eh.spark.errors import from_worker_text
from airflow_provider_eh.spark.mapping import BODY_COL, HASH_COL, PARTITION_COL, SLOT_COL, RowMapping, content_hash

PIDS = ["0", "1", "2", "3"]
SLOTS = {"0": 10, "1": 11, "2": 12, "3": 13}


def row_json_body(row: dict) -> str:
    return f"order {row['id']}"


def test_key_column_maps_rows_to_the_same_partition_as_partition_key() -> None:
    mapping = RowMapping(key_column="customer")
    for key in ["a", "customer-17", 42, b"\x00bytes"]:
        assert mapping.event_partition({"customer": key}, PIDS) == partition_for_key(key, PIDS)


def test_body_is_the_column_or_serializer_or_row_as_sorted_json() -> None:
    row = {"id": 3, "customer": "c", "note": "hi"}
    assert RowMapping(key_column="customer", body_column="note").event_body(row) == b"hi"
    assert RowMapping(key_column="customer", serializer=row_json_body).event_body(row) == b"order 3"
    assert RowMapping(key_column="customer").event_body(row) == b'{"customer":"c","id":3,"note":"hi"}'


def test_properties_follow_the_local_paths_rule_nulls_kept_and_non_scalars_refused() -> None:
    mapping = RowMapping(key_column="k", property_columns=("a", "b"))
    row = {"k": "x", "a": 1, "b": None}
    _, local = normalise({"body": "x", "partition_id": "0", "properties": {"a": 1, "b": None}}, 0, PIDS)
    assert mapping.event_properties(row) == local.properties == {"a": 1, "b": None}  # null kept, as AMQP null
    assert mapping.event_properties({"k": "x", "a": None, "b": None}) == {"a": None, "b": None}
    assert RowMapping(key_column="k").event_properties(row) is None
    for value, kind in (([1, 2], "list"), ({"m": 1}, "dict"), (decimal.Decimal("1.5"), "Decimal"), (dt.date(2026, 5, 1), "date")):
        with pytest.raises(InvalidEventError) as spark_error:
            mapping.event_of({"k": "x", "a": value, "b": None}, PIDS)
        assert str(spark_error.value) == (
            f"row with k='x': property column 'a' is a {kind}; use str, int, float, bool, bytes or None: cast the "
            "column in the Spark job (a date, timestamp or decimal to string or a number; an array, map or struct "
            "to_json), or drop it from property_columns"
        )
        with pytest.raises(InvalidEventError, match=f"^event 0: field 'properties.a' is a {kind}; use str, int, float, bool, bytes or None$"):
            normalise({"body": "x", "partition_id": "0", "properties": {"a": value}}, 0, PIDS)


def test_mapping_needs_a_partition_or_key_column_and_not_both() -> None:
    with pytest.raises(ValueError, match="give partition_column .* or key_column"):
        RowMapping(body_column="b")
    with pytest.raises(ValueError, match="not both"):
        RowMapping(partition_column="p", key_column="k")


def test_float_key_is_refused_naming_the_column() -> None:
    with pytest.raises(InvalidEventError, match=r"row with k=1.5: key column 'k' holds a float; .* Cast the column to string"):
        RowMapping(key_column="k").event_partition({"k": 1.5}, PIDS)


def test_event_over_the_limit_names_the_row() -> None:
    mapping = RowMapping(key_column="k", body_column="b", order_by=("ts",))
    with pytest.raises(EventTooLargeError, match=r"row with k='x', ts=5 \(partition \d\): 1048577 bytes"):
        mapping.event_of({"k": "x", "b": "y" * (1024 * 1024 + 1), "ts": 5}, PIDS)


def test_content_hash_separates_events_that_differ_only_in_properties() -> None:
    assert content_hash(b"a", {"p": 1}) != content_hash(b"a", {"p": 2})
    assert content_hash(b"a", None) == content_hash(b"a", {})


def test_map_rows_routes_hashes_and_keeps_order_and_property_columns() -> None:
    mapping = RowMapping(key_column="customer", property_columns=("region",), order_by=("id",))
    batch = pa.RecordBatch.from_pylist([{"id": i, "customer": f"c{i}", "region": i % 3} for i in range(20)])
    out = pa.Table.from_batches(list(executor.map_rows([batch], mapping, PIDS, SLOTS, mapping.kept_columns())))
    assert out.column_names == [PARTITION_COL, SLOT_COL, HASH_COL, BODY_COL, "id", "region"]
    parts = out.column(PARTITION_COL).to_pylist()
    assert parts == [partition_for_key(f"c{i}", PIDS) for i in range(20)]
    assert out.column(SLOT_COL).to_pylist() == [SLOTS[p] for p in parts]
    assert out.column(HASH_COL).to_pylist()[0] == content_hash(out.column(BODY_COL).to_pylist()[0], {"region": 0})


def prepared(mapping: RowMapping, rows: list[dict]) -> list[pa.RecordBatch]:
    """Rows through map_rows, sorted as the job sorts them: (partition, order columns, content hash)."""
    table = pa.Table.from_batches(list(executor.map_rows(
        [pa.RecordBatch.from_pylist(rows)], mapping, PIDS, SLOTS, mapping.kept_columns())))
    table = table.sort_by([(PARTITION_COL, "ascending"), *((c, "ascending") for c in mapping.order_by), (HASH_COL, "ascending")])
    return table.to_batches(max_chunksize=7)


def test_fingerprint_pass_matches_the_engine_fingerprint_per_partition() -> None:
    mapping = RowMapping(key_column="customer", property_columns=("region",), order_by=("id",))
    rows = [{"id": i, "customer": f"c{i % 5}", "region": i % 3} for i in range(50)]
    got = pa.Table.from_batches(list(executor.fingerprint_rows(prepared(mapping, rows), mapping))).to_pylist()
    for entry in got:
        mine = sorted((r for r in rows if partition_for_key(r["customer"], PIDS) == entry["partition"]), key=lambda r: r["id"])
        fp, count = fingerprint_of((mapping.event_body(r), mapping.event_properties(r)) for r in mine)
        assert (entry["count"], entry["fingerprint"]) == (count, fp)
    assert sum(e["count"] for e in got) == 50


def test_a_retried_task_attempt_refuses_to_send(monkeypatch: pytest.MonkeyPatch) -> None:
    mapping = RowMapping(key_column="customer")
    rows = [{"id": i, "customer": "same"} for i in range(5)]
    pid = partition_for_key("same", PIDS)
    plan = PartitionPlan("g", pid, "b" * 64, 1, 5, "f", "send")
    monkeypatch.setattr(executor, "_first_attempt", lambda: False)
    out = pa.Table.from_batches(list(executor.send_rows(prepared(mapping, rows), mapping, None, {pid: plan}))).to_pylist()  # type: ignore[arg-type]
    outcome = pickle.loads(out[0]["outcome"])
    assert out[0]["partition"] == pid and (outcome.ok, outcome.error_type) == (False, "RetriedSparkTask") and outcome.transient is True


def test_worker_traceback_text_becomes_the_provider_error_again() -> None:
    text = ("org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File \"x.py\", line 1\n"
            "airflow_provider_eh.errors.InvalidEventError: row with k=None: key column 'k' is null\n\tat org.apache...")
    error = from_worker_text(text)
    assert isinstance(error, InvalidEventError) and str(error) == "row with k=None: key column 'k' is null"
    assert from_worker_text("java.lang.OutOfMemoryError: Java heap space") is None
