"""What the view finds by itself: settings from the request, the connection or the configuration; hubs in
blob paths; producer states among Airflow Variables; connection types of environment variables."""

from __future__ import annotations

import json

import pytest

from airflow_provider_eh.plugins.readers.discovery import _conn_type_of, checkpoint_hubs, settle, state_hubs
from airflow_provider_eh.plugins.readers.reading import Source
from airflow_provider_eh.plugins.readers.variables import ReadOnlyVariables, parse_state, state_candidates, state_key
from airflow_provider_eh.publishing.document import ProducerState, StateKey


def test_a_setting_comes_from_the_request_then_the_connection_then_the_configuration() -> None:
    config = {"wasb_conn_id": "wasb_conf", "checkpoint_container": "cp-conf"}.get
    source, origins = settle(Source("eh", state_container=" st-req "), {"checkpoint_container": "cp-conn"}, config)
    assert (source.wasb_conn_id, source.state_container, source.checkpoint_container) == ("wasb_conf", "st-req", "cp-conn")
    assert origins == {"wasb_conn_id": "config", "state_container": "request", "checkpoint_container": "connection"}
    # the form's prefixed extra names count too; nothing anywhere: wasb_default and no container
    source, origins = settle(Source("eh"), {"extra__azure_event_hubs__state_container": "st"}, lambda name: None)
    assert (source.wasb_conn_id, source.state_container, source.checkpoint_container) == ("wasb_default", "st", None)
    assert origins == {"wasb_conn_id": "default", "state_container": "connection", "checkpoint_container": "none"}
    assert source.connection_ids() == ["eh", "wasb_default"]


def test_hubs_are_found_in_state_and_checkpoint_blob_paths_of_the_namespace_only() -> None:
    names = ["ns.servicebus.windows.net/orders/g1/producer-state/0", "ns.servicebus.windows.net/orders/g2/producer-state/1",
             "ns.servicebus.windows.net/refunds/g1/producer-state/0", "other.servicebus.windows.net/x/g/producer-state/0",
             "_ledger/ns.servicebus.windows.net/audit/g/0/history/1"]
    assert state_hubs(names, "ns.servicebus.windows.net") == {"orders", "refunds"}
    checkpoints = ["127.0.0.1:5672/orders/$default/checkpoint/0", "127.0.0.1/Refunds/Audit/ownership/3",
                   "127.0.0.1:5672/orders/$default/other/0", "127.0.0.1:5673/nope/g/checkpoint/0"]
    assert checkpoint_hubs(checkpoints, "127.0.0.1:5672") == {"orders", "refunds"}


def test_the_connection_type_of_an_environment_connection_is_read_from_json_or_uri() -> None:
    assert _conn_type_of(json.dumps({"conn_type": "azure_event_hubs", "extra": {}})) == "azure_event_hubs"
    assert _conn_type_of("azure-event-hubs://ns.servicebus.windows.net") == "azure_event_hubs"
    assert _conn_type_of("wasb://") == "wasb"
    assert _conn_type_of("{not json") is None and _conn_type_of("plain") is None


def test_ledger_records_are_told_from_state_documents_by_their_keys_and_contents() -> None:
    keys = ["eh_producer_state.orders.0", "eh_producer_state.dag.task.3", "eh_producer_state.orders.0.history.12",
            "eh_producer_state.orders.0.batch.abc", "eh_producer_state.x", "other.orders.0", "eh_producer_state..0"]
    assert state_candidates(keys) == ["eh_producer_state.orders.0", "eh_producer_state.dag.task.3"]
    state = ProducerState.new(StateKey("ns", "Hub", "Dag.Task", "3"))
    key = state_key("Dag.Task", "3")
    assert key == "eh_producer_state.dag.task.3"
    parsed = parse_state(key, state.to_json())
    assert parsed is not None and (parsed.namespace, parsed.hub, parsed.group, parsed.partition) == ("ns", "hub", "Dag.Task", "3")
    assert parse_state("eh_producer_state.other.3", state.to_json()) is None  # a document under another group's key
    assert parse_state(key, '{"batch_id": "b", "events": 3}') is None and parse_state(key, "not json") is None


def test_the_views_variables_refuse_every_write() -> None:
    variables = ReadOnlyVariables({"eh_producer_state.g.0": "{}"})
    assert variables.get("eh_producer_state.g.0") == "{}"
    with pytest.raises(PermissionError, match="never writes"):
        variables.set("eh_producer_state.g.0", "{}")
    with pytest.raises(PermissionError, match="never writes"):
        variables.delete("eh_producer_state.g.0")


def test_producer_states_in_variables_are_shown_only_where_the_auth_manager_allows_reading_the_variable() -> None:
    from airflow_provider_eh.plugins.readers.variables import variable_reader

    class Manager:
        asked: list[tuple[str, str | None]] = []

        def is_authorized_variable(self, *, method: str, details: object, user: object) -> bool:
            self.asked.append((method, details.key))  # type: ignore[attr-defined]
            return details.key == "eh_producer_state.g.0"  # type: ignore[attr-defined]

    manager = Manager()
    may_read = variable_reader(manager, object())
    assert may_read("eh_producer_state.g.0") and not may_read("eh_producer_state.g.1")
    assert manager.asked == [("GET", "eh_producer_state.g.0"), ("GET", "eh_producer_state.g.1")]
