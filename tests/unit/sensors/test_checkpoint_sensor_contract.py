"""The sensor's contract with Airflow that needs no service: resuming from the trigger, and refusing what cannot work."""

from __future__ import annotations

import warnings

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException, AirflowSensorTimeout

from airflow_provider_eh.checkpoints.lag import CheckpointProgress, PartitionLag
from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor


def _sensor(**kwargs: object) -> EventHubCheckpointSensor:
    return EventHubCheckpointSensor(task_id="wait", checkpoint_container="checkpoints", targets={"0": 3}, **kwargs)  # type: ignore[arg-type]


def _progress(checkpoint: int) -> dict:
    lag = PartitionLag("analytics", "0", target=3, checkpoint=checkpoint, last_enqueued=5)
    return CheckpointProgress("orders", "checkpoints", (lag,)).to_dict()


def test_execute_complete_returns_the_checkpoints_on_success() -> None:
    event = {"status": "success", "message": "1/1 partition targets reached", "progress": _progress(3)}
    assert _sensor().execute_complete({}, event) == {"analytics": {"0": 3}}  # type: ignore[arg-type]


def test_execute_complete_raises_a_sensor_timeout_carrying_the_lag() -> None:
    event = {"status": "timeout", "message": "partition 0: checkpoint 1, target 3 (2 to go)", "progress": _progress(1)}
    with pytest.raises(AirflowSensorTimeout, match=r"timed out after 60.0 seconds\. partition 0: checkpoint 1, target 3 \(2 to go\)"):
        _sensor(timeout=60).execute_complete({}, event)  # type: ignore[arg-type]


@pytest.mark.parametrize("event", [None, {}])
def test_execute_complete_raises_on_a_missing_event(event: dict | None) -> None:
    with pytest.raises(AirflowException, match="ended without an event"):
        _sensor().execute_complete({}, event)  # type: ignore[arg-type]


def test_execute_complete_raises_on_an_error_event_with_its_message() -> None:
    event = {"status": "error", "message": "CheckpointStoreError: Checkpoint container 'x' does not exist"}
    with pytest.raises(AirflowException, match="waiting on checkpoints failed: CheckpointStoreError: Checkpoint container 'x'"):
        _sensor().execute_complete({}, event)  # type: ignore[arg-type]


@pytest.mark.parametrize(("retryable", "expected"), [(False, AirflowFailException), (True, AirflowException), (None, AirflowException)])
def test_an_error_event_is_mapped_like_the_same_error_in_a_poke(retryable: bool | None, expected: type) -> None:
    """Non-retryable (a missing container): no retries; retryable, or an event from before the flag: retried."""
    event = {"status": "error", "message": "CheckpointStoreError: Checkpoint container 'x' does not exist"}
    if retryable is not None:
        event["retryable"] = retryable
    with pytest.raises(AirflowException) as raised:
        _sensor().execute_complete({}, event)  # type: ignore[arg-type]
    assert type(raised.value) is expected
    assert str(raised.value).startswith("Task 'wait': waiting on checkpoints failed: CheckpointStoreError")


def test_the_trigger_says_whether_a_retry_can_help(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from airflow_provider_eh.errors import CheckpointStoreError, ConnectionUnreachableError
    from airflow_provider_eh.triggers import checkpoint as trigger_module

    class FailingHook:
        raised: Exception

        def __init__(self, **_: object) -> None:
            pass

        async def progress(self, *_: object) -> None:
            raise self.raised

        async def close(self) -> None:
            pass

    monkeypatch.setattr(trigger_module, "CheckpointAsyncHook", FailingHook)
    trigger = trigger_module.EventHubCheckpointTrigger(targets={"0": 3}, consumer_groups=["g"], container="x")
    for raised, retryable in [(CheckpointStoreError("container 'x' does not exist"), False),
                              (ConnectionUnreachableError("wasb", "timed out"), True), (OSError("reset"), True)]:
        FailingHook.raised = raised
        event = asyncio.run(trigger._wait()).payload
        assert (event["status"], event["retryable"]) == ("error", retryable), event


def test_reschedule_mode_without_targets_is_refused_because_it_keeps_no_state_between_pokes() -> None:
    with pytest.raises(ValueError, match="targets=None .* pass targets, or use mode='poke' or deferrable=True"):
        EventHubCheckpointSensor(task_id="wait", checkpoint_container="c", mode="reschedule", deferrable=False)
    EventHubCheckpointSensor(task_id="wait2", checkpoint_container="c", mode="reschedule", deferrable=True)


def test_connection_ids_targets_and_names_are_templated() -> None:
    assert set(EventHubCheckpointSensor.template_fields) == {
        "checkpoint_container", "consumer_groups", "targets", "eventhub_name", "event_hubs_conn_id", "wasb_conn_id",
    }


def test_the_old_spelling_container_still_works_with_a_deprecation_warning_naming_the_new_one() -> None:
    with pytest.warns(AirflowProviderDeprecationWarning, match=r"container=\.\.\.\) is deprecated and will be removed "
                                                               r"in 2\.0\.0; pass checkpoint_container"):
        old = EventHubCheckpointSensor(task_id="old", container="checkpoints", targets={"0": 3})  # type: ignore[call-arg]
    assert old.checkpoint_container == "checkpoints" and "checkpoint_container" in old.template_fields
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling warns about nothing
        assert _sensor().checkpoint_container == "checkpoints"
    with pytest.warns(AirflowProviderDeprecationWarning), pytest.raises(ValueError, match="disagree"):
        EventHubCheckpointSensor(task_id="both", container="a", checkpoint_container="b")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="pass checkpoint_container"):
        EventHubCheckpointSensor(task_id="none", targets={"0": 3})
