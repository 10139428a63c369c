"""The adapter of the SDK's private names, against the installed SDK (offline: nothing is opened).

``tests/integration/client/test_sdk_releases.py`` runs this file, and the adapter's tests against the
local endpoint, on every azure-eventhub release of the range ``pyproject.toml`` declares.
"""

from __future__ import annotations

import pytest
from azure.eventhub import EventData, EventDataBatch

from airflow_provider_eh.client import sdk_internals
from airflow_provider_eh.client.fencing import AUTO, REQUIRED, FencedLink, fencing_mode, open_fenced
from airflow_provider_eh.errors import HubFencingUnavailableError


def test_the_installed_sdk_has_every_internal_the_adapter_relies_on() -> None:
    assert sdk_internals.check() == [], sdk_internals.describe_missing(sdk_internals.check())
    assert all(sdk_internals.supported(feature) for feature in sdk_internals.FEATURES)


def test_every_internal_names_its_feature_and_why() -> None:
    wheres = [i.where for i in sdk_internals.INTERNALS]
    assert len(wheres) == len(set(wheres))
    for internal in sdk_internals.INTERNALS:
        assert internal.feature in sdk_internals.FEATURES and internal.why, internal
        kind, name = internal.where.split(":", 1)
        assert kind == "instance" or kind.startswith("azure."), internal
        assert any(part.startswith("_") for part in (*kind.split("."), *name.split("."))) or kind == "instance", internal


@pytest.mark.parametrize("where", [
    "azure.eventhub._producer:EventHubProducer._no_such_method",  # a method gone
    "azure.eventhub._no_such_module:Anything",  # a module gone
    "instance:SendClient._no_such_attribute",  # an instance's attribute gone
])
def test_the_check_reports_an_internal_the_sdk_lacks(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    gone = sdk_internals.Internal(sdk_internals.FENCING, where, "the test's")
    monkeypatch.setattr(sdk_internals, "INTERNALS", (*sdk_internals.INTERNALS, gone))
    assert sdk_internals.check() == [gone] and sdk_internals.check(sdk_internals.FENCING) == [gone]
    assert sdk_internals.check(sdk_internals.BATCH_FAST_PATH) == []
    assert not sdk_internals.supported(sdk_internals.FENCING)
    text = sdk_internals.describe_missing([gone])
    assert text == f"azure-eventhub {sdk_internals.sdk_version()} lacks {where}"


def test_typed_values_encode_as_the_hub_expects() -> None:
    for name, value, wire in (("short", 5, b"\x61\x00\x05"), ("int", 5, b"\x54\x05"), ("long", 5, b"\x55\x05"),
                              ("symbol", b"ab", b"\xa3\x02ab")):
        out = bytearray()
        sdk_internals.encode_value(out, sdk_internals.typed(name, value))
        assert bytes(out) == wire, name


def test_one_encode_per_event_builds_the_batch_add_builds() -> None:
    ours, theirs = EventDataBatch(max_size_in_bytes=4096), EventDataBatch(max_size_in_bytes=4096)
    assert sdk_internals.batch_fast_path(ours)
    for i in range(5):
        event = EventData(f"body {i}")
        event.properties = {"i": i}
        sdk_internals.batch_add_once(ours, event)
        theirs.add(event)
    assert (len(ours), ours.size_in_bytes) == (len(theirs), theirs.size_in_bytes)
    assert list(ours._message[5]) == list(theirs._message[5])  # the same encoded messages
    with pytest.raises(ValueError, match="size limit"):
        sdk_internals.batch_append(ours, b"x" * 5000)


def test_a_batch_keyed_by_partition_key_takes_the_sdks_add() -> None:
    assert not sdk_internals.batch_fast_path(EventDataBatch(partition_key="k"))


def test_a_received_message_becomes_the_sdks_event_data_and_back() -> None:
    from azure.eventhub._pyamqp.message import Message  # the test builds what the receiver would hand over

    message = Message(data=[b"body"], application_properties={b"a": 1},
                      message_annotations={b"x-opt-sequence-number": 7, b"x-opt-offset": b"70"})
    event = sdk_internals.event_data_of(message)
    assert (event.body_as_str(), event.sequence_number, event.offset, event.properties) == ("body", 7, "70", {b"a": 1})
    assert sdk_internals.message_of(event) is message


def test_hub_fencing_settings_are_checked() -> None:
    assert [fencing_mode(v) for v in (AUTO, REQUIRED, False)] == ["auto", "required", False]
    for wrong in (True, None, "on", 0):
        with pytest.raises(ValueError, match="hub_fencing="):
            fencing_mode(wrong)


def test_fencing_with_internals_missing_never_touches_the_sdk(monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    """``auto`` warns and gives an ordinary link; ``required`` raises naming the SDK and the internal."""
    gone = sdk_internals.Internal(sdk_internals.FENCING, "instance:SendClient._gone", "the test's")
    monkeypatch.setattr(sdk_internals, "INTERNALS", (*sdk_internals.INTERNALS, gone))

    class Untouchable:
        def __getattr__(self, name: str) -> None:
            raise AssertionError(f"the client was used ({name})")

    with caplog.at_level("WARNING"):
        assert open_fenced(Untouchable(), "3", group="g", owner_level=1, mode=AUTO) is None
    assert "partition 3" in caplog.text and "instance:SendClient._gone" in caplog.text
    with pytest.raises(HubFencingUnavailableError) as raised:
        open_fenced(Untouchable(), "3", group="g", owner_level=1, mode=REQUIRED)
    assert f"azure-eventhub {sdk_internals.sdk_version()}" in str(raised.value)
    assert "instance:SendClient._gone" in str(raised.value) and not raised.value.retryable


def test_fenced_annotations_match_the_sdks_encoder() -> None:
    link = FencedLink("0", 2**40 + 3, 7, -1)
    for seq in (0, 127, 128, 2**31 - 1):
        event = EventData(b"x")
        event.raw_amqp_message.annotations.update(link.annotations(seq))
        assert bytes(sdk_internals.sdk_encode(event)).startswith(link.annotation_bytes(seq))
