"""``hub_fencing``'s three settings, each against the local endpoint with the real SDK.

``"auto"`` fences at the hub where the hub and the installed SDK can, else by the claim's lease (a
warning when it is the SDK); ``"required"`` fails before anything is sent where either cannot, naming
which; ``False`` sends on ordinary links. The hub's answer is the endpoint's (``--no-idempotent-producers``
turns the capability off); an SDK whose internals differ is made by adding an internal it lacks to
the adapter's table, from the test side.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from publish_kit import PublishSetup, assert_exactly_once, batch, events_for

from airflow_provider_eh.client import sdk_internals
from airflow_provider_eh.client.fencing import PRODUCER_SEQUENCE
from airflow_provider_eh.errors import HubFencingUnavailableError
from airflow_provider_eh.operators.task_errors import airflow_error
from airflow_provider_eh.publishing.document import StateKey
from eventhubs_local import EmulatorProcess
from tests.conftest import unique_name
from tests.integration.publishing.test_hub_fencing import _annotations

MISSING = sdk_internals.Internal(sdk_internals.FENCING, "azure.eventhub._producer:EventHubProducer._gone_in_this_release",
                                 "an internal this SDK lacks (the test's)")


@pytest.fixture
def sdk_without_fencing_internals(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The adapter's check reports an internal of hub fencing missing, as on an SDK release that changed it."""
    monkeypatch.setattr(sdk_internals, "INTERNALS", (*sdk_internals.INTERNALS, MISSING))
    assert [i.where for i in sdk_internals.check(sdk_internals.FENCING)] == [MISSING.where]
    yield


@pytest.fixture
def plain_hub(azurite: Any, container: str, tmp_path: Path) -> Iterator[PublishSetup]:
    """A hub on an endpoint that does not offer idempotent producers."""
    with EmulatorProcess(tmp_path / "no-fencing", extra_args=["--no-idempotent-producers"]) as plain:
        hub = unique_name("plain")
        plain.admin.create_hub(hub, partitions=2)
        yield PublishSetup(plain, azurite, hub, container)


def _nothing_pending(setup: PublishSetup, partitions: tuple[str, ...] = ("0", "1")) -> None:
    store = setup.publisher().store
    for pid in partitions:
        state = store.read(StateKey.of(setup.endpoint, "g", pid))
        assert state is None or state.pending is None, f"partition {pid}: an intent was written"


def test_required_fences_at_a_hub_that_offers_it(setup: PublishSetup) -> None:
    events = events_for("required", 20, partitions=2)
    results = setup.publisher(hub_fencing="required").publish(events, batch_id=batch("required"))
    assert {r.fencing for r in results.values()} == {"hub"}
    assert_exactly_once(setup.read_back(), events)
    assert all(PRODUCER_SEQUENCE in n for n in _annotations(setup, "0", 10))


def test_false_sends_on_ordinary_links_where_the_hub_offers_fencing(setup: PublishSetup) -> None:
    events = events_for("off", 20, partitions=2)
    results = setup.publisher(hub_fencing=False).publish(events, batch_id=batch("off"))
    assert {r.fencing for r in results.values()} == {"lease"}
    assert_exactly_once(setup.read_back(), events)
    assert not any(PRODUCER_SEQUENCE in n for n in _annotations(setup, "0", 10))


def test_auto_fences_by_the_lease_on_a_hub_without_idempotent_producers(plain_hub: PublishSetup) -> None:
    events = events_for("auto-plain", 20, partitions=2)
    results = plain_hub.publisher(hub_fencing="auto").publish(events, batch_id=batch("auto-plain"))
    assert {r.fencing for r in results.values()} == {"lease"}
    assert_exactly_once(plain_hub.read_back(), events)


def test_required_fails_before_sending_on_a_hub_without_idempotent_producers(plain_hub: PublishSetup) -> None:
    events = events_for("required-plain", 20, partitions=2)
    with pytest.raises(HubFencingUnavailableError, match="the hub does not offer idempotent producers") as raised:
        plain_hub.publisher(hub_fencing="required").publish(events, batch_id=batch("required-plain"))
    assert "Nothing was sent" in str(raised.value) and "hub_fencing='auto'" in str(raised.value)
    assert not raised.value.retryable
    assert plain_hub.read_back() == []
    _nothing_pending(plain_hub)  # failed before the intent: a retry starts afresh


def test_auto_with_sdk_internals_that_differ_warns_and_fences_by_the_lease(
        setup: PublishSetup, sdk_without_fencing_internals: None, caplog: pytest.LogCaptureFixture) -> None:
    events = events_for("auto-sdk", 20, partitions=2)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_eh.client.fencing"):
        results = setup.publisher(hub_fencing="auto").publish(events, batch_id=batch("auto-sdk"))
    assert {r.fencing for r in results.values()} == {"lease"}  # never silently: the result says so
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and all(f"azure-eventhub {sdk_internals.sdk_version()}" in w and "_gone_in_this_release" in w
                            for w in warnings), warnings
    assert_exactly_once(setup.read_back(), events)
    assert not any(PRODUCER_SEQUENCE in n for n in _annotations(setup, "0", 10))  # ordinary links


def test_required_with_sdk_internals_that_differ_fails_before_sending(
        setup: PublishSetup, sdk_without_fencing_internals: None) -> None:
    events = events_for("required-sdk", 20, partitions=2)
    with pytest.raises(HubFencingUnavailableError) as raised:
        setup.publisher(hub_fencing="required").publish(events, batch_id=batch("required-sdk"))
    text = str(raised.value)
    assert f"azure-eventhub {sdk_internals.sdk_version()}" in text and "_gone_in_this_release" in text
    assert "Nothing was sent" in text
    assert setup.read_back() == []
    _nothing_pending(setup)
    # the task fails without burning Airflow's retries
    from airflow.providers.common.compat.sdk import AirflowFailException

    assert isinstance(airflow_error(raised.value, "publish"), AirflowFailException)


def test_hub_fencing_takes_only_its_three_settings(setup: PublishSetup) -> None:
    for wrong in (True, "yes", None, 1):
        with pytest.raises(ValueError, match="hub_fencing="):
            setup.publisher(hub_fencing=wrong)
