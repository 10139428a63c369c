"""An error crosses the triggerer's boundary as data and comes out in the task with its class and ``retryable``."""

from __future__ import annotations

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from airflow_provider_eh.errors import (
    ConnectionUnreachableError,
    CredentialRefusedError,
    ServiceBusyError,
    TriggerReportedError,
    UnknownConsumerGroupError,
)
from airflow_provider_eh.triggers.reported import error_event, reported_error, task_error


def test_a_configuration_error_fails_the_task_without_retries_and_keeps_its_class_as_the_cause() -> None:
    event = error_event(CredentialRefusedError("eh_orders", "the service refused the connection's credential"))
    assert event == {"status": "error", "retryable": False, "error_type": "CredentialRefusedError", "conn_id": "eh_orders",
                     "message": "CredentialRefusedError: Connection 'eh_orders': the service refused the connection's credential"}
    raised = task_error("wait", "waiting on checkpoints", event)
    assert type(raised) is AirflowFailException
    assert str(raised) == ("Task 'wait': waiting on checkpoints failed: CredentialRefusedError: Connection 'eh_orders': "
                           "the service refused the connection's credential")
    assert type(raised.__cause__) is CredentialRefusedError and raised.__cause__.conn_id == "eh_orders"


@pytest.mark.parametrize("error", [ConnectionUnreachableError("eh", "the connection was lost"), ServiceBusyError("busy")])
def test_a_transient_error_is_raised_again_as_its_own_class_so_airflow_retries_it(error: Exception) -> None:
    raised = task_error("wait", "waiting for an event", error_event(error))
    assert type(raised) is type(error) and raised.retryable  # type: ignore[attr-defined]
    assert str(raised).startswith(f"Task 'wait': waiting for an event failed: {type(error).__name__}: ")


def test_a_non_retryable_error_without_a_connection_keeps_its_class() -> None:
    error = reported_error(error_event(UnknownConsumerGroupError("consumer group 'x' does not exist")))
    assert type(error) is UnknownConsumerGroupError and not error.retryable and error.conn_id is None


def test_an_error_not_of_the_package_is_retried_and_only_the_package_classes_are_ever_built() -> None:
    event = error_event(OSError("reset by peer"))
    assert event["retryable"] and "error_type" not in event
    assert type(task_error("wait", "waiting", event)) is AirflowException
    for named in ("SystemExit", "KeyboardInterrupt", "__class__", "TriggerReportedError", "os.system"):
        built = reported_error({"status": "error", "message": "m", "retryable": False, "error_type": named})
        assert type(built) is TriggerReportedError and not built.retryable


def test_an_event_of_an_older_trigger_without_the_flag_is_retried() -> None:
    assert type(task_error("wait", "waiting", {"status": "error", "message": "m"})) is AirflowException
