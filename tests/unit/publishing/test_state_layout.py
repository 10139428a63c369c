"""The ledger's typed records: the layout documented in state.py is theirs, and a state document
written by the previous (dict-based) version loads unchanged, round-trips byte for byte and goes on
publishing, in the Variables store (here) and the blob store (tests/integration/publishing)."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import InvalidProducerStateError
from airflow_provider_eh.publishing.variable_store import VariableProducerStateStore
from airflow_provider_eh.publishing import IdempotentPublisher
from airflow_provider_eh.publishing import publisher as publisher_module
from airflow_provider_eh.publishing import state as state_module
from airflow_provider_eh.publishing.sender import SendReport
from airflow_provider_eh.publishing.state import CommittedBatch, PartialBatch, PendingIntent, ProducerState, StateKey

FIXTURE = Path(__file__).with_name("state_v1_fixture.json")  # written by the dict-based ledger
KEY = StateKey("ns.example", "hub", "g", "0")


def test_documented_layout_is_the_records_fields() -> None:
    doc = state_module.__doc__ or ""
    for record in (CommittedBatch, PendingIntent, PartialBatch):
        line = re.search(rf"{record.__name__}:\s*\{{(.*?)\}}", doc, re.S)
        assert line is not None, f"{record.__name__} is not documented in state.py"
        documented = re.findall(r'"(\w+)"(\??)', line.group(1))
        assert [name for name, _ in documented] == [f.name for f in fields(record)]
        assert {name for name, optional in documented if optional} == set(record.OPTIONAL)
    for name in state_module.RECORDS:
        assert f'"{name}":' in doc


def test_a_document_of_the_dict_based_ledger_loads_unchanged_and_round_trips_byte_for_byte() -> None:
    text = FIXTURE.read_text().strip()
    state = ProducerState.from_json(text, KEY, "fixture", "delete it")
    assert state.to_json() == text
    assert isinstance(state.pending, PendingIntent) and state.pending.first_of_batch == 21
    assert state.pending.assigned_end == 2020 and state.pending.attempt_indexes[-1] == 999
    assert state.partial["a" * 64] == PartialBatch(6, "fpa", [[0, 2]], 10)
    assert state.committed["b" * 64].first_seq == 16 and state.committed["b" * 64].owner_level == 4
    older = json.loads(text)  # before fingerprints, owner levels and batch_first_seq were recorded
    for record in older["committed"].values():
        del record["fingerprint"], record["owner_level"]
    del older["pending"]["batch_first_seq"], older["pending"]["started_at"], older["partial"]["a" * 64]["batch_first_seq"]
    old_text = json.dumps(older, separators=(",", ":"))
    old_state = ProducerState.from_json(old_text, KEY, "fixture", "delete it")
    assert old_state.to_json() == old_text and old_state.pending.first_of_batch == 1021
    broken = json.loads(text)
    del broken["pending"]["start_sequence_number"]
    with pytest.raises(InvalidProducerStateError, match="misses or mangles field 'PendingIntent.start_sequence_number'"):
        ProducerState.from_json(json.dumps(broken), KEY, "fixture", "delete it")


class Variables:
    """The two calls of ``airflow.sdk.Variable`` the store makes, over a dict."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


def test_the_variables_store_goes_on_from_a_document_of_the_dict_based_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    variables = Variables()
    store = VariableProducerStateStore(variables)
    variables.values[store.variable_name(KEY)] = FIXTURE.read_text().strip()
    assert store.read(KEY).to_json() == FIXTURE.read_text().strip()
    landed: dict[int, Any] = {}
    monkeypatch.setattr(IdempotentPublisher, "_partition_end", lambda self, pid, producer=None: 5000)
    monkeypatch.setattr(publisher_module, "landed_stamps", lambda *a, **k: dict(landed))
    monkeypatch.setattr(IdempotentPublisher, "_fence", lambda self, key, level: None)  # no hub here
    publisher = IdempotentPublisher(EventHubsEndpoint("ns.example", "hub", connection_string="Endpoint=sb://x/"),
                                    store, producer_group="g")
    landed.update({1021 + i: 0 for i in range(400)})  # the in-doubt batch c: its first 400 events landed
    session = publisher.begin("0", "c" * 64, 1000, "fpc")
    plan = session.plan
    assert (plan.recovered_from, plan.landed_count, plan.indexes, plan.first_seq) == ("pending", 400, ((400, 1000),), 2021)
    result = publisher.commit(session, SendReport("0", "c" * 64, 1000, "fpc", 600, 5600, 0.1))
    assert (result.first_seq, result.last_seq, result.status) == (21, 2620, "recovered")
    again = ProducerState.from_json(variables.values[store.variable_name(KEY)], KEY, "variable", "delete it")
    assert again.committed["c" * 64].first_seq == 21 and again.pending is None and "a" * 64 in again.partial
