"""Operators take settings records: small signatures, the flat arguments as deprecated spellings, records templated."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.sdk import DAG, BaseOperator

from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.operators import deprecated_arguments
from airflow_provider_eh.operators.ingest import (
    Batching,
    BlobCheckpoints,
    DeltaSink,
    EventHubDeadLetterReplayOperator,
    EventHubIngestOperator,
    IngestLimits,
    Ownership,
    Sessions,
    SqlSink,
)
from airflow_provider_eh.operators.publish import EventHubPublishOperator
from airflow_provider_eh.operators.settings import Delivery, EventSchema
from airflow_provider_eh.operators.spark_publish import EventMapping, ProducerState, SparkOutput, SparkToEventHubOperator

DEPRECATED = tuple(cls for _, cls in inspect.getmembers(deprecated_arguments, inspect.isclass)
                   if cls.__name__.startswith("Deprecated"))


def own_parameters(operator: type[BaseOperator]) -> list[str]:
    """The keyword arguments an operator declares itself (its classes', not BaseOperator's nor the deprecated ones)."""
    names: list[str] = []
    for cls in operator.mro():
        if cls in DEPRECATED or not issubclass(cls, BaseOperator) or cls is BaseOperator or "__init__" not in vars(cls):
            continue
        names += [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "kwargs") and p not in names]
    return names


@pytest.mark.parametrize(("operator", "most"), [
    (EventHubIngestOperator, 14), (EventHubDeadLetterReplayOperator, 11), (EventHubPublishOperator, 10),
    (SparkToEventHubOperator, 14),
])
def test_each_operator_signature_reads_in_a_glance(operator: type[BaseOperator], most: int) -> None:
    # before the records: ingest 37, replay 18, publish 24, Spark 36
    assert len(own_parameters(operator)) <= most, own_parameters(operator)


def _quiet(**kwargs: Any) -> EventHubIngestOperator:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the records warn about nothing
        return EventHubIngestOperator(task_id="new", **kwargs)


def _old(**kwargs: Any) -> EventHubIngestOperator:
    with pytest.warns(AirflowProviderDeprecationWarning, match=r"deprecated and will be removed in 2\.0\.0; pass "):
        return EventHubIngestOperator(task_id="old", **kwargs)


INGEST_FIELDS = ("sink", "table", "sql_conn_id", "state_table_prefix", "sink_wasb_conn_id", "delta_mode", "merge_keys",
                 "partition_by", "dead_letter_table", "checkpoint_container", "wasb_conn_id", "checkpoint_interval",
                 "instances", "strategy", "ownership_expiry", "batch_size", "batch_bytes", "batch_seconds",
                 "max_wait_time", "max_events", "max_duration", "partition_ids", "stall_timeout", "lag_interval",
                 "session_key")


@pytest.mark.parametrize(("old", "new"), [
    ({"table": "t", "sql_conn_id": "pg", "state_table_prefix": "x_"}, {"sink": SqlSink("t", conn_id="pg", state_table_prefix="x_")}),
    ({"table": "/d", "sink": "delta", "wasb_conn_id": "w", "delta_mode": "merge", "merge_keys": ["id"],
      "partition_by": ["day"], "dead_letter_table": "/dl"},
     {"sink": DeltaSink("/d", wasb_conn_id="w", mode="merge", merge_keys=["id"], partition_by=["day"],  # type: ignore[arg-type]
                        dead_letter_table="/dl")}),
    ({"table": "t", "checkpoint_container": "c", "wasb_conn_id": "w", "checkpoint_interval": 3.0},
     {"sink": SqlSink("t"), "checkpoints": BlobCheckpoints("c", wasb_conn_id="w", interval=3.0)}),
    ({"table": "t", "instances": 2, "strategy": "greedy", "ownership_expiry": 30.0},
     {"sink": SqlSink("t"), "ownership": Ownership(instances=2, strategy="greedy", expiry=30.0)}),
    ({"table": "t", "batch_size": 10, "batch_bytes": 2048, "batch_seconds": 0.5, "max_wait_time": 2.0},
     {"sink": SqlSink("t"), "batching": Batching(size=10, byte_size=2048, seconds=0.5, max_wait_time=2.0)}),
    ({"table": "t", "max_events": 5, "max_duration": 9.0, "partition_ids": ["0"], "stall_timeout": 7.0, "lag_interval": 1.0},
     {"sink": SqlSink("t"), "limits": IngestLimits(max_events=5, max_duration=9.0, partition_ids=["0"],  # type: ignore[arg-type]
                                                   stall_timeout=7.0, lag_interval=1.0)}),
    ({"table": "t", "session_key": "property:s", "session_first_sequence": 1, "session_defer_limit": 5.0},
     {"sink": SqlSink("t"), "sessions": Sessions("property:s", first_sequence=1, defer_limit=5.0)}),
])
def test_every_flat_ingest_argument_still_works_and_means_what_its_record_field_means(old: dict[str, Any],
                                                                                      new: dict[str, Any]) -> None:
    before, after = _old(**old), _quiet(**new)
    assert {f: getattr(before, f) for f in INGEST_FIELDS} == {f: getattr(after, f) for f in INGEST_FIELDS}
    assert before.sessions == after.sessions


def test_a_warning_names_the_arguments_given_and_the_record_to_pass_instead() -> None:
    with pytest.warns(AirflowProviderDeprecationWarning) as caught:
        EventHubIngestOperator(task_id="old", table="t", max_events=5, max_duration=9)
    assert [str(w.message) for w in caught] == [
        "Task 'old': table= is deprecated and will be removed in 2.0.0; pass sink=SqlSink(table=...)",
        "Task 'old': max_events=, max_duration= are deprecated and will be removed in 2.0.0; "
        "pass limits=IngestLimits(max_events=..., max_duration=...)",
    ]


def test_a_record_and_its_deprecated_arguments_together_are_refused_and_a_sink_is_required() -> None:
    with pytest.raises(ValueError, match=r"pass limits=IngestLimits\(\.\.\.\) or the deprecated max_events=, not both"):
        EventHubIngestOperator(task_id="both", sink=SqlSink("t"), limits=IngestLimits(), max_events=3)
    with pytest.raises(SinkConfigError, match=r"pass sink=SqlSink\(table, conn_id=\.\.\.\) or sink=DeltaSink"):
        EventHubIngestOperator(task_id="none")
    with pytest.raises(SinkConfigError, match=r"sink=\{'table': 't'\}: pass SqlSink"):
        EventHubIngestOperator(task_id="dict", sink={"table": "t"})  # type: ignore[arg-type]


def test_records_refuse_a_bad_value_naming_the_record_and_the_field() -> None:
    with pytest.raises(ValueError, match=r"DeltaSink\(mode='upsert'\): must be one of 'append', 'merge'"):
        DeltaSink("/d", mode="upsert")
    with pytest.raises(ValueError, match=r"Ownership\(strategy='fair'\)"):
        Ownership(strategy="fair")
    with pytest.raises(ValueError, match=r"hub_fencing='always'"):
        Delivery(hub_fencing="always")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"lease_only_batch_bytes=10"):
        Delivery(lease_only_batch_bytes=10)
    with pytest.raises(ValueError, match=r"ProducerState\(backend='blob'\): give container="):
        ProducerState("blob")
    with pytest.raises(ValueError, match=r"ProducerState\(backend='s3'\): must be one of 'blob', 'variable'"):
        ProducerState("s3")
    with pytest.raises(ValueError, match=r"SparkOutput\(\): give path=\.\.\. \(with format=\.\.\.\) or table="):
        SparkOutput()


def test_a_connection_id_in_default_args_builds_no_record_and_clashes_with_none() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op = EventHubIngestOperator(task_id="shared", sink=SqlSink("t"), checkpoints=BlobCheckpoints("c", wasb_conn_id="mine"),
                                    default_args={"wasb_conn_id": "shared_wasb"})
    assert (op.checkpoint_container, op.wasb_conn_id) == ("c", "mine")


def test_strings_in_records_are_templated_like_the_operators_own_arguments() -> None:
    op = _quiet(sink=SqlSink("{{ params.table }}", conn_id="{{ params.conn }}"),
                checkpoints=BlobCheckpoints("{{ params.container }}"), limits=IngestLimits(max_events="{{ params.n }}"))  # type: ignore[arg-type]
    op.render_template_fields({"params": {"table": "orders", "conn": "pg", "container": "ckpt", "n": "7"}})  # type: ignore[arg-type]
    assert (op.table, op.sql_conn_id, op.checkpoint_container, op.max_events) == ("orders", "pg", "ckpt", "7")


def test_mapped_tasks_take_records_and_still_take_the_flat_arguments_in_partial() -> None:
    with DAG("mapped_settings", schedule=None):
        new = EventHubIngestOperator.partial(task_id="new", sink=SqlSink("t"), checkpoints=BlobCheckpoints("c"),
                                             ownership=Ownership(instances=2)).expand(instance=[0, 1])
        old = EventHubIngestOperator.partial(task_id="old", table="t", checkpoint_container="c",
                                             instances=2).expand(instance=[0, 1])
    assert new.partial_kwargs["sink"] == SqlSink("t") and old.partial_kwargs["table"] == "t"
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_event'"):
        EventHubIngestOperator.partial(task_id="typo", sink=SqlSink("t"), max_event=3)


def test_publishing_records_set_what_the_flat_arguments_set() -> None:
    schema = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
    with pytest.warns(AirflowProviderDeprecationWarning):
        before = EventHubPublishOperator(
            task_id="old", events=[1], state_container="states", wasb_conn_id="w", lease_seconds=30, keep_committed=5,
            hub_fencing=False, send_attempts=2, schema_group="g", schema=schema, schema_compatibility="Backward")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = EventHubPublishOperator(
            task_id="new", events=[1], state=ProducerState("blob", container="states", wasb_conn_id="w", lease_seconds=30,
                                                        keep_committed=5),
            delivery=Delivery(hub_fencing=False, send_attempts=2),
            schema=EventSchema("g", definition=schema, compatibility="Backward"))
    fields = ("state_backend", "state_container", "wasb_conn_id", "lease_seconds", "claim_timeout", "keep_committed",
              "keep_committed_days", "hub_fencing", "send_attempts", "lease_only_batch_bytes", "schema_group", "schema",
              "schema_file", "schema_name", "schema_format", "auto_register_schema", "schema_compatibility")
    assert {f: getattr(after, f) for f in fields} == {**{f: getattr(before, f) for f in fields}, "state_backend": "blob"}
    assert before.backend == after.backend == "blob"


def test_variable_state_is_a_choice_the_log_does_not_warn_about(caplog: pytest.LogCaptureFixture) -> None:
    from structlog.testing import capture_logs

    chosen = EventHubPublishOperator(task_id="chosen", events=[1], state=ProducerState("variable", keep_committed=3))
    defaulted = EventHubPublishOperator(task_id="defaulted", events=[1])
    with capture_logs() as logs:
        assert chosen.backend_in_force() == "variable" and chosen.keep_committed == 3
    assert not [e for e in logs if "Airflow Variables" in e.get("event", "")]
    with capture_logs() as logs:
        assert defaulted.backend_in_force() == "variable"
    assert [e for e in logs if "Airflow Variables" in e.get("event", "")]


def test_the_spark_operator_takes_its_output_and_mapping_as_records() -> None:
    with pytest.warns(AirflowProviderDeprecationWarning, match=r"pass output=SparkOutput\(path=\.\.\., format=\.\.\.\)"):
        before = SparkToEventHubOperator(task_id="old", path="/p", format="json", key_column="k", order_by=["t"],
                                         property_columns=["a"])
    after = SparkToEventHubOperator(task_id="new", output=SparkOutput("/p", format="json"),
                                    mapping=EventMapping(key="k", order_by=["t"], properties=["a"]))  # type: ignore[arg-type]
    fields = ("path", "format", "table", "read_options", "body_column", "serializer", "property_columns",
              "partition_column", "key_column", "order_by")
    assert {f: getattr(before, f) for f in fields} == {f: getattr(after, f) for f in fields}
    with pytest.raises(ValueError, match=r"pass output=SparkOutput\(path=\.\.\., format=\.\.\.\) or"):
        SparkToEventHubOperator(task_id="none")


@pytest.mark.parametrize("evolve", [True, False])
def test_the_sinks_evolve_columns_reaches_the_operators_store(evolve: bool, tmp_path: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("AIRFLOW_CONN_EVOLVE_DB", json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "sink.db")}))
    endpoint = type("Endpoint", (), {"namespace": "ns.local", "eventhub_name": "hub"})()
    sql_kwargs = {} if evolve else {"evolve_columns": False}
    for op in (_quiet(sink=SqlSink("t", conn_id="evolve_db", **sql_kwargs)),
               EventHubDeadLetterReplayOperator(task_id="replay", sink=SqlSink("t", conn_id="evolve_db", **sql_kwargs))):
        store = op._store(endpoint)
        assert (op.evolve_columns, store.evolve_columns) == (evolve, evolve)
        store.close()
