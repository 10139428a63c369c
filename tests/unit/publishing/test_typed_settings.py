"""Typed publishing's pure parts: the schema settings refused when the DAG is parsed, the definition and
its registered name, and the fingerprint covering a typed batch's content type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_eh.publishing.fingerprint import Fingerprint
from airflow_provider_eh.publishing.records import CommittedBatch
from airflow_provider_eh.publishing.typed import load_definition, name_of, schema_format

ORDER = {"type": "record", "name": "Order", "namespace": "com.example", "fields": [{"name": "id", "type": "long"}]}


def operator(**schema: Any) -> Any:
    from airflow_provider_eh.operators.publish import EventHubPublishOperator

    return EventHubPublishOperator(task_id="publish", events=[], **schema)


@pytest.mark.parametrize(("settings", "message"), [
    ({"schema": ORDER}, "schema is set but schema_group is not"),
    ({"schema_name": "com.example.Order"}, "schema_name is set but schema_group is not"),
    ({"schema_group": "orders"}, "schema_group='orders': give the schema too"),
    ({"schema_group": "orders", "schema": ORDER, "schema_file": "order.avsc"}, "give `schema` or `schema_file`, not both"),
    ({"schema_group": "orders", "schema": ORDER, "schema_format": "Protobuf"}, "schema_format='Protobuf': must be one of Avro, Json"),
    ({"schema_group": "orders", "schema_name": "x", "auto_register_schema": True}, "auto_register_schema=True needs the definition"),
    ({"schema_group": "orders", "schema": "[1, 2]"}, "schema: a JSON list; a schema is a JSON object"),
    ({"schema_group": "orders", "schema": "{not json"}, "schema: not JSON"),
    ({"schema_group": "orders", "schema": ORDER, "auto_register_schema": "yes"}, "auto_register_schema='yes': must be True or False"),
    ({"schema_group": "orders", "schema": ORDER, "schema_compatibility": "Transitive"},
     "schema_compatibility='Transitive': must be one of None, Backward, Forward, Full"),
])
def test_incomplete_or_contradictory_schema_settings_are_refused_naming_the_parameter(
        settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as refused:
        operator(**settings)
    assert message in str(refused.value)


def test_a_complete_setting_builds_and_no_schema_leaves_the_operator_untyped() -> None:
    assert operator(schema_group="orders", schema=ORDER).schema_group == "orders"
    assert operator(schema_group="orders", schema_name="com.example.Order").schema_name == "com.example.Order"
    assert operator().schema_group is None


def test_definition_from_a_dict_text_or_file_and_its_registered_name(tmp_path: Path) -> None:
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(ORDER))
    assert json.loads(load_definition(ORDER) or "") == ORDER
    assert load_definition(schema_file=str(path)) == json.dumps(ORDER)
    with pytest.raises(ValueError, match="schema_file='/nowhere.avsc': cannot be read"):
        load_definition(schema_file="/nowhere.avsc")
    assert name_of(json.dumps(ORDER), "Avro", None) == "com.example.Order"
    with pytest.raises(ValueError, match="registered under its full name 'com.example.Order'"):
        name_of(json.dumps(ORDER), "Avro", "Order")
    assert name_of(json.dumps({"title": "Refund", "type": "object"}), "Json", None) == "Refund"
    with pytest.raises(ValueError, match="needs a 'title', or give schema_name"):
        name_of(json.dumps({"type": "object"}), "Json", None)
    assert schema_format("json") == "Json" and schema_format("AVRO") == "Avro"


def test_the_fingerprint_covers_the_content_type_and_leaves_untyped_batches_as_they_were() -> None:
    def digest(content_type: str | None) -> str:
        fp = Fingerprint(content_type)
        fp.update(b"\x02\x04", {"k": "v"})
        return fp.hexdigest()

    untyped = Fingerprint()
    untyped.update(b"\x02\x04", {"k": "v"})
    assert digest(None) == untyped.hexdigest()
    # the same bytes under another schema id (a version that changed only a doc string) are other content
    assert len({digest(None), digest("avro/binary+aaaa"), digest("avro/binary+bbbb")}) == 3


def test_the_ledger_records_a_typed_batch_schema_and_reads_records_without_one() -> None:
    schema = {"group": "orders", "name": "com.example.Order", "id": "ab" * 16, "version": 2, "format": "Avro"}
    record = CommittedBatch(events=3, first_seq=0, last_seq=2, service_last_sequence_number=9, schema=schema)
    assert CommittedBatch.from_doc(record.to_doc()).schema == schema
    older = CommittedBatch(events=3, first_seq=0, last_seq=2, service_last_sequence_number=9).to_doc()
    assert "schema" not in older and CommittedBatch.from_doc(older).schema is None


def test_the_spark_operator_takes_the_same_schema_settings() -> None:
    from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

    with pytest.raises(ValueError, match="schema is set but schema_group is not"):
        SparkToEventHubOperator(task_id="p", path="/out", key_column="k", schema=ORDER)
    built = SparkToEventHubOperator(task_id="p", path="/out", key_column="k", schema_group="orders", schema=ORDER,
                                    schema_compatibility="backward")
    assert {"schema_group", "schema_file", "schema_name"} <= set(built.template_fields)


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_a_schema_group_that_renders_empty_publishes_untyped_events_without_asking_a_registry(fmt: str) -> None:
    """A DAG param can switch typed publishing off: the group renders empty, and the schema beside it is unused."""
    from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

    built = SparkToEventHubOperator(task_id="p", path="/out", key_column="k", schema=ORDER, auto_register_schema=True,
                                    schema_group="{{ 'orders' if params.format == 'avro' else '' }}",
                                    event_hubs_conn_id="no_such_connection")
    built.render_template_fields({"params": {"format": fmt}})
    assert built.schema_group == ("orders" if fmt == "avro" else "")
    if fmt == "json":
        assert built.row_encoder() is None  # untyped: the connection (which does not exist) is not read
    else:
        with pytest.raises(Exception, match="no_such_connection"):
            built.row_encoder()  # typed: the registry is looked up through the connection


def test_a_row_encoder_travels_pickled_and_encodes_as_microsofts_encoder_without_a_registry() -> None:
    """What a Spark executor gets: the definition and schema, pickled; Microsoft's encoder on a client that knows
    only them. A row that does not fit names the row, the field and the schema version."""
    import pickle

    from azure.schemaregistry.encoder.avroencoder import AvroEncoder

    from airflow_provider_eh.errors import InvalidEventError
    from airflow_provider_eh.publishing.typed import ResolvedSchemaClient, RowEncoder, SchemaUsed

    used = SchemaUsed("orders", "com.example.Order", "cd" * 16, 3, "Avro")
    encoder = RowEncoder(json.dumps(ORDER), used)
    assert encoder.encode({"id": 7}, "row 1") == b"\x0e"
    travelled = pickle.loads(pickle.dumps(encoder))
    assert travelled.content_type == "avro/binary+" + "cd" * 16
    reference = AvroEncoder(client=ResolvedSchemaClient(json.dumps(ORDER), used), group_name="orders")
    assert travelled.encode({"id": 2**40}, "row 2") == reference.encode({"id": 2**40}, schema=json.dumps(ORDER))["content"]
    with pytest.raises(InvalidEventError) as bad:
        travelled.encode({"id": "seven"}, "row with customer='c-1', order_id=7")
    text = str(bad.value)
    assert text.startswith("row with customer='c-1', order_id=7 does not fit schema orders/com.example.Order version 3")
    assert '"id"' in text and "Nothing of this batch was sent" in text


def test_a_schema_registered_under_another_name_than_its_avro_full_name_still_encodes() -> None:
    """``schema_name="orders-value"`` (registered so by other tooling): the encoder derives the full name, and the
    resolved schema is still the one it gets; another definition is not."""
    from airflow_provider_eh.publishing.typed import ResolvedSchemaClient, RowEncoder, SchemaUsed

    used = SchemaUsed("orders", "orders-value", "ef" * 16, 1, "Avro")
    assert RowEncoder(json.dumps(ORDER), used).encode({"id": 1}, "row 0") == b"\x02"
    with pytest.raises(LookupError, match="not another definition of orders/com.example.Order"):
        ResolvedSchemaClient(json.dumps(ORDER), used).get_schema_properties("orders", "com.example.Order", "{}", "Avro")
