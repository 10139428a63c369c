"""One rule turns the package's errors into Airflow's, and the publish, ingest and sensor tasks all apply it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, AirflowSensorTimeout

from airflow_provider_eh.errors import (
    CheckpointStoreError,
    ConnectionConfigError,
    ConnectionUnreachableError,
    InvalidEventError,
    ProducerDisconnectedError,
    SinkConfigError,
)
from airflow_provider_eh.operators.task_errors import airflow_error, airflow_errors, trigger_error

FAILS = AirflowFailException  # no retries
SAME = "same"  # raised as it is: Airflow retries it (or it already says what it means)

TABLE = [
    (InvalidEventError("row 3: body is not JSON serialisable"), FAILS, "Task 't': row 3: body is not JSON serialisable"),
    (CheckpointStoreError("Checkpoint container 'c' does not exist"), FAILS,
     "Task 't': Checkpoint container 'c' does not exist"),
    (SinkConfigError("table 'orders' has no column 'x'"), FAILS, "Task 't': table 'orders' has no column 'x'"),
    (ConnectionConfigError("eh", "no namespace"), FAILS, "Task 't': Connection 'eh': no namespace"),
    (ConnectionUnreachableError("eh", "timed out"), SAME, None),
    (ProducerDisconnectedError("partition 0: fenced"), SAME, None),
    (ValueError("batch_size='x': not a number"), FAILS, "Task 't': batch_size='x': not a number"),
    (json.JSONDecodeError("Expecting value", "{", 1), FAILS, "Task 't': Expecting value: line 1 column 2 (char 1)"),
    (AirflowFailException("Task 't': nothing to publish"), SAME, None),
    (AirflowSensorTimeout("timed out"), SAME, None),
    (AirflowException("the trigger ended without an event"), SAME, None),
    (OSError("connection reset"), SAME, None),
    (KeyError("x"), SAME, None),
]


@pytest.mark.parametrize(("exc", "expected", "message"), TABLE, ids=[type(row[0]).__name__ + str(i) for i, row in enumerate(TABLE)])
def test_mapping_table(exc: Exception, expected: object, message: str | None) -> None:
    mapped = airflow_error(exc, "t")
    if expected is SAME:
        assert mapped is exc
    else:
        assert type(mapped) is expected
        assert str(mapped) == message


def test_the_context_manager_chains_the_original_and_lets_retryable_errors_through() -> None:
    original = InvalidEventError("row 3: bad key")
    with pytest.raises(AirflowFailException) as failed, airflow_errors("t"):
        raise original
    assert failed.value.__cause__ is original

    retryable = ProducerDisconnectedError("partition 0: fenced")
    with pytest.raises(ProducerDisconnectedError) as raised, airflow_errors("t"):
        raise retryable
    assert raised.value is retryable


@pytest.mark.parametrize(("retryable", "expected"), [(False, AirflowFailException), (True, AirflowException), (None, AirflowException)])
def test_a_trigger_error_event_is_mapped_by_the_same_rule(retryable: bool | None, expected: type) -> None:
    """A trigger reports an error as data; its ``retryable`` flag decides as the error's own would (absent: retried)."""
    event = {"status": "error", "message": "CheckpointStoreError: container 'c' does not exist"}
    if retryable is not None:
        event["retryable"] = retryable
    mapped = trigger_error("t", "waiting on checkpoints", event)
    assert type(mapped) is expected
    assert str(mapped) == "Task 't': waiting on checkpoints failed: CheckpointStoreError: container 'c' does not exist"
    if retryable is False:  # the same answer the table gives for the error itself
        assert type(airflow_error(CheckpointStoreError("container 'c' does not exist"), "t")) is expected


def test_publish_operator_applies_the_rule_to_its_arguments() -> None:
    from airflow_provider_eh.operators.publish import EventHubPublishOperator

    operator = EventHubPublishOperator(task_id="publish", events=[], generation=-1)
    with pytest.raises(AirflowFailException, match=r"^Task 'publish': generation=-1: must be a whole number >= 0"):
        operator.execute({"ti": SimpleNamespace(try_number=1, map_index=-1)})  # type: ignore[arg-type]


def test_ingest_operator_applies_the_rule_to_its_arguments_and_its_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_eh.operators.ingest import EventHubDeadLetterReplayOperator, EventHubIngestOperator

    conn_str = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=c2VjcmV0;EntityPath=orders"
    monkeypatch.setenv("AIRFLOW_CONN_EH_ERRORS", json.dumps({"conn_type": "azure_event_hubs",
                                                             "extra": {"connection_string": conn_str}}))
    ingest = EventHubIngestOperator(task_id="ingest", table="t", event_hubs_conn_id="eh_errors", batch_size="many")
    with pytest.raises(AirflowFailException, match=r"^Task 'ingest': invalid literal for int\(\) with base 10: 'many'"):
        ingest.execute({"run_id": "r"})  # type: ignore[arg-type]

    monkeypatch.setenv("AIRFLOW_CONN_EH_BROKEN", json.dumps({"conn_type": "azure_event_hubs"}))
    replay = EventHubDeadLetterReplayOperator(task_id="replay", table="t", event_hubs_conn_id="eh_broken")
    with pytest.raises(AirflowFailException, match=r"^Task 'replay': Connection 'eh_broken': "):
        replay.execute({})  # type: ignore[arg-type]


def test_sensor_applies_the_rule_to_targets_that_do_not_parse() -> None:
    from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor

    sensor = EventHubCheckpointSensor(task_id="wait", checkpoint_container="c", targets="{'0': 'five'}")
    with pytest.raises(AirflowFailException, match=r"^Task 'wait': target of partition '0' is 'five'; expected a sequence number"):
        sensor.poke({})  # type: ignore[arg-type]


def test_delta_batch_seconds_still_works_with_a_deprecation_warning_naming_the_batching_record() -> None:
    import warnings

    from airflow.exceptions import AirflowProviderDeprecationWarning

    from airflow_provider_eh.operators.ingest import Batching, DeltaSink, EventHubIngestOperator

    with pytest.warns(AirflowProviderDeprecationWarning, match=r"delta_batch_seconds= is deprecated and will be removed "
                                                               r"in 2\.0\.0; pass batching=Batching\(seconds=\.\.\.\)"):
        old = EventHubIngestOperator(task_id="old", table="/t", sink="delta", delta_batch_seconds=2.5)
    assert old.batch_seconds == 2.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = EventHubIngestOperator(task_id="new", sink=DeltaSink("/t"), batching=Batching(seconds=2.5))
        assert new.batch_seconds == 2.5
        assert EventHubIngestOperator(task_id="default", sink=DeltaSink("/t")).batch_seconds is None  # 10 s at run
    with pytest.warns(AirflowProviderDeprecationWarning), pytest.raises(ValueError, match="disagree"):
        EventHubIngestOperator(task_id="both", table="/t", sink="delta", delta_batch_seconds=1, batch_seconds=2)
    with pytest.warns(AirflowProviderDeprecationWarning, match="a SQL sink never read it"):
        assert EventHubIngestOperator(task_id="sql", table="t", delta_batch_seconds=2.5).batch_seconds is None
