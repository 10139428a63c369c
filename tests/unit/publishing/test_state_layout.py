"""The ledger's typed records: the layout documented in document.py is theirs, and a state document
written by earlier versions (the dict-based ledger, every committed batch inside: version 1) loads,
is moved into records by its first claim without losing a batch, and goes on publishing, in the
Variables store (here) and the blob store (tests/integration/publishing)."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import InvalidProducerStateError
from airflow_provider_eh.publishing import IdempotentPublisher
from airflow_provider_eh.publishing import document as document_module
from airflow_provider_eh.publishing import in_doubt as in_doubt_module
from airflow_provider_eh.publishing import records as records_module
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.in_doubt import InDoubt
from airflow_provider_eh.publishing.records import CommittedBatch, Ledger, PartialBatch, PendingIntent
from airflow_provider_eh.publishing.sender import SendReport
from airflow_provider_eh.publishing.variable_store import VariableProducerStateStore
from tests.support.variables import DictVariables

FIXTURE = Path(__file__).with_name("state_v1_fixture.json")  # written by the dict-based ledger
KEY = StateKey("ns.example", "hub", "g", "0")


def test_documented_layout_is_the_records_fields() -> None:
    doc = document_module.__doc__ or ""
    for record in (Ledger, CommittedBatch, PendingIntent, PartialBatch):
        line = re.search(rf"{record.__name__}:\s*\{{(.*?)\}}", doc, re.S)
        assert line is not None, f"{record.__name__} is not documented in document.py"
        documented = re.findall(r'"(\w+)"(\??)', line.group(1))
        assert [name for name, _ in documented] == [f.name for f in fields(record)]
        assert {name for name, optional in documented if optional} == set(record.OPTIONAL)
    for name in records_module.RECORDS:
        assert f'"{name}":' in doc


def test_a_version_1_document_loads_with_every_committed_batch_and_is_never_written_back_unmoved() -> None:
    text = FIXTURE.read_text().strip()
    state = ProducerState.from_json(text, KEY, "fixture", "delete it")
    assert isinstance(state.pending, PendingIntent) and state.pending.first_of_batch == 21
    assert state.pending.assigned_end == 2020 and state.pending.attempt_indexes[-1] == 999
    assert state.partial["a" * 64] == PartialBatch(6, "fpa", [[0, 2]], 10)
    assert state.unmigrated["b" * 64].first_seq == 16 and state.unmigrated["b" * 64].owner_level == 4
    assert state.committed_count == 2 and state.last_committed.batch_id == "b" * 64
    with pytest.raises(RuntimeError, match="2 committed batches of a version 1 document are not in records yet"):
        state.to_json()
    older = json.loads(text)  # before fingerprints, owner levels and batch_first_seq were recorded
    for record in older["committed"].values():
        del record["fingerprint"], record["owner_level"]
    del older["pending"]["batch_first_seq"], older["pending"]["started_at"], older["partial"]["a" * 64]["batch_first_seq"]
    old_state = ProducerState.from_json(json.dumps(older, separators=(",", ":")), KEY, "fixture", "delete it")
    assert old_state.pending.first_of_batch == 1021 and old_state.unmigrated["1" * 64].fingerprint is None
    broken = json.loads(text)
    del broken["pending"]["start_sequence_number"]
    with pytest.raises(InvalidProducerStateError, match="misses or mangles field 'PendingIntent.start_sequence_number'"):
        ProducerState.from_json(json.dumps(broken), KEY, "fixture", "delete it")


def test_the_first_claim_moves_a_version_1_ledger_into_records_and_a_crash_midway_loses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    variables = DictVariables()
    store = VariableProducerStateStore(variables)
    doc = json.loads(FIXTURE.read_text())
    doc["pending"] = None
    doc["committed"] = {f"{i:064x}": {"events": 1, "first_seq": i, "last_seq": i, "service_last_sequence_number": i}
                        for i in reversed(range(3000))}
    variables.values[store.variable_name(KEY)] = json.dumps(doc)
    puts = 0
    real_set = variables.set

    def failing_set(key: str, value: str) -> None:  # storage gives out after 1,500 records
        nonlocal puts
        puts += 1
        if puts > 1500:
            raise ConnectionError("storage went away")
        real_set(key, value)

    monkeypatch.setattr(variables, "set", failing_set)
    with pytest.raises(ConnectionError):
        store.claim(KEY)
    assert json.loads(variables.values[store.variable_name(KEY)])["version"] == 1  # the document still has them all
    monkeypatch.setattr(variables, "set", real_set)
    claim = store.claim(KEY)
    stored = json.loads(variables.values[store.variable_name(KEY)])
    assert stored["version"] == 2 and "committed" not in stored and stored["owner_level"] == 7
    assert (stored["ledger"]["first"], stored["ledger"]["next"], stored["ledger"]["last"]["batch_id"]) == (0, 3000, f"{2999:064x}")
    for i in (0, 1234, 2999):  # looked up by id; ordinals in sequence-number order
        record = store.find_committed(KEY, f"{i:064x}")
        assert (record.first_seq, record.ordinal) == (i, i)
    assert [r.last_seq for r in store.history(KEY, limit=3).batches] == [2999, 2998, 2997]
    assert len(variables.values) == 1 + 2 * 3000
    store.release(claim)


def test_the_variables_store_goes_on_from_a_document_of_the_dict_based_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    variables = DictVariables()
    store = VariableProducerStateStore(variables)
    variables.values[store.variable_name(KEY)] = FIXTURE.read_text().strip()
    assert store.read(KEY).committed_count == 2
    landed: dict[int, Any] = {}
    monkeypatch.setattr(IdempotentPublisher, "_partition_end", lambda self, pid, producer=None: 5000)
    monkeypatch.setattr(in_doubt_module, "landed_stamps", lambda *a, **k: dict(landed))
    monkeypatch.setattr(InDoubt, "fence", lambda self, key, level: None)  # no hub here
    publisher = IdempotentPublisher(EventHubsEndpoint("ns.example", "hub", connection_string="Endpoint=sb://x/"),
                                    store, producer_group="g")
    landed.update({1021 + i: 0 for i in range(400)})  # the in-doubt batch c: its first 400 events landed
    session = publisher.begin("0", "c" * 64, 1000, "fpc")
    plan = session.plan
    assert (plan.recovered_from, plan.landed_count, plan.indexes, plan.first_seq) == ("pending", 400, ((400, 1000),), 2021)
    result = publisher.commit(session, SendReport("0", "c" * 64, 1000, "fpc", 600, 5600, 0.1))
    assert (result.first_seq, result.last_seq, result.status) == (21, 2620, "recovered")
    again = ProducerState.from_json(variables.values[store.variable_name(KEY)], KEY, "variable", "delete it")
    assert store.find_committed(KEY, "c" * 64).first_seq == 21 and again.pending is None and "a" * 64 in again.partial
    assert store.find_committed(KEY, "b" * 64).first_seq == 16 and again.ledger.count == 3


@pytest.mark.parametrize("record", [
    CommittedBatch(3, 1, 3, 41, batch_id="b", ordinal=0),
    PendingIntent("b", 1, None, 3, "fp", 1, 40, []),
    PartialBatch(3, "fp", [[0, 1]]),
    Ledger(1, 0, None),
])
def test_ledger_records_are_immutable(record: Any) -> None:
    """A record is written once; a state that changes makes a new one (``Ledger.added``), never edits one in place."""
    from dataclasses import FrozenInstanceError

    with pytest.raises(FrozenInstanceError):
        setattr(record, fields(record)[0].name, 99)


def test_ledger_added_and_pruned_make_new_ledgers() -> None:
    ledger = Ledger()
    record = CommittedBatch(3, 1, 3, 41, batch_id="b", ordinal=0)
    grown = ledger.added(record)
    assert (ledger.next, ledger.last) == (0, None)
    assert (grown.next, grown.last, grown.count) == (1, record, 1)
    assert grown.pruned(1).count == 0 and grown.count == 1
