"""Every Avro type into a Delta table created from the schema, read back with ``deltalake`` (the ``deltalake`` extra)."""

from __future__ import annotations

import copy

import pytest
from deltalake import DeltaTable

from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest import BatchProcessor, json_rows
from airflow_provider_eh.ingest.sinks.delta import DeltaIngestStore, DeltaTarget
from tests.support.typed_columns import (
    COLUMNS,
    EVERYTHING,
    STREAM,
    Endpoint,
    Registry,
    avro_row,
    encoded,
    expected,
    read_back,
    with_field,
)


def test_every_avro_type_lands_in_a_delta_table_created_from_the_schema(tmp_path) -> None:
    registry = Registry()
    uri = str(tmp_path / "everything")
    processor = BatchProcessor(uri, json_rows(), decoder=TypedDecoder(Endpoint(registry)))
    store = DeltaIngestStore(DeltaTarget(uri), STREAM)
    with store.transaction() as tx:
        result = processor.process(tx, "0", [encoded(registry, n, avro_row(n)) for n in (1, 2)])
        tx.advance_checkpoint("0", -1, 2, "2", "me")
    assert (result.rows, result.dead_letters) == (2, 0)
    table = DeltaTable(uri)
    types = {f.name: str(f.type) for f in table.schema().fields}
    assert types["price"] == 'PrimitiveType("decimal(10,2)")' and types["ts_ms"] == 'PrimitiveType("timestamp")'
    assert types["day"] == 'PrimitiveType("date")' and types["address"].startswith("StructType(")
    assert types["lines"].startswith("ArrayType(StructType(")
    assert table.protocol().min_reader_version == 1 and table.protocol().min_writer_version == 2
    rows = sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    for n, row in zip((1, 2), rows, strict=True):
        want = expected("delta", n)
        assert {c: read_back("delta", row[c], c) for c in COLUMNS} == {c: want[c] for c in COLUMNS}

    # a field gained: a column added; a field whose type changed: an error naming it and what to do
    newer = with_field({"name": "rating", "type": ["null", "double"], "default": None})
    store = DeltaIngestStore(DeltaTarget(uri), STREAM)
    with store.transaction() as tx:
        processor.process(tx, "0", [encoded(registry, 3, {**avro_row(3), "rating": 4.5}, newer)])
        tx.advance_checkpoint("0", 2, 3, "3", "me")
    assert sorted((r["id"], r["rating"]) for r in DeltaTable(uri).to_pyarrow_table().to_pylist()) == [
        (1, None), (2, None), (3, 4.5)]
    changed = copy.deepcopy(EVERYTHING)
    changed["fields"][2] = {"name": "small", "type": "string"}
    with pytest.raises(SinkConfigError, match=r"field 'small' as string .* has it as PrimitiveType\(\"integer\"\).*new table"):
        with store.transaction() as tx:
            processor.process(tx, "0", [encoded(registry, 4, {**avro_row(4), "small": "x"}, changed)])


@pytest.mark.parametrize("evolve", [True, False])
def test_the_delta_sinks_evolve_columns_reaches_the_operators_store(evolve: bool, tmp_path) -> None:
    from airflow_provider_eh.operators.ingest import DeltaSink, EventHubIngestOperator
    from airflow_provider_eh.operators.ingest_base import delta_store

    endpoint = type("Endpoint", (), {"namespace": "ns.local", "eventhub_name": "hub"})()
    ingest = EventHubIngestOperator(task_id="load", sink=DeltaSink(str(tmp_path / "d"), evolve_columns=evolve))
    assert ingest._delta_store(endpoint).target.evolve_columns is evolve
    assert delta_store(endpoint, "$Default", str(tmp_path / "d"), "w", evolve_columns=evolve).target.evolve_columns is evolve
