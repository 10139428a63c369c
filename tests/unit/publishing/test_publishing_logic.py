"""Pure logic of the publishing engine: batch ids, key hash, fingerprints, state documents and the
ledger's transitions (with an in-memory store and a fake read-back)."""

from __future__ import annotations

import hashlib
import signal
from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import BatchContentChangedError, InvalidEventError, InvalidProducerStateError
from airflow_provider_eh.publishing import (
    Fingerprint,
    IdempotentPublisher,
    derive_batch_id,
    fingerprint_of,
    normalise,
    partition_for_key,
)
from airflow_provider_eh.publishing import in_doubt as in_doubt_module
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.fingerprint import canonical_properties
from airflow_provider_eh.publishing.in_doubt import InDoubt
from airflow_provider_eh.publishing.records import from_ranges, to_ranges
from airflow_provider_eh.publishing.sender import SendReport
from airflow_provider_eh.publishing.state import ProducerStateStore
from airflow_provider_eh.steps import observe, reached
from airflow_provider_eh.testing.crash import crash_at
from tests.support.forking import fork_run

KEY = StateKey("ns.example", "hub", "g", "0")


def test_batch_id_is_stable_for_the_same_interval_and_changes_with_generation_and_map_index() -> None:
    args = dict(interval_start="2026-01-01T00:00:00+00:00", interval_end="2026-01-02T00:00:00+00:00")
    a = derive_batch_id("g", "dag", "task", **args)
    assert a == derive_batch_id("g", "dag", "task", **args)
    assert len(a) == 64
    assert a != derive_batch_id("g", "dag", "task", generation=1, **args)
    assert a != derive_batch_id("g", "dag", "task", map_index=2, **args)
    assert a != derive_batch_id("g", "dag", "task", interval_start="2026-01-02T00:00:00+00:00", interval_end="x")
    assert derive_batch_id("g", "d", "t", run_id="manual__1") == derive_batch_id("g", "d", "t", run_id="manual__1")
    with pytest.raises(ValueError, match="data interval"):
        derive_batch_id("g", "d", "t")


def test_partition_key_hash_is_the_documented_sha256_and_refuses_unstable_types() -> None:
    ids = ["0", "1", "2", "3", "10"]
    ordered = ["0", "1", "2", "3", "10"]
    for key in ("order-17", b"\x00\x01", 12345):
        raw = key if isinstance(key, bytes) else str(key).encode()
        expected = ordered[int.from_bytes(hashlib.sha256(raw).digest()[:8], "big") % 5]
        assert partition_for_key(key, ids) == expected
    assert partition_for_key("k", ["3", "1", "0", "2"]) == partition_for_key("k", ["0", "1", "2", "3"])
    for bad in (1.5, None, ("a",), True):
        with pytest.raises(InvalidEventError, match="event 4: field 'partition_key'"):
            partition_for_key(bad, ids, index=4)


def test_fingerprint_depends_on_order_bodies_and_properties_and_is_incremental() -> None:
    events = [(b"a", {"x": 1}), (b"b", None), (b"c", {"y": b"\x01"})]
    whole, count = fingerprint_of(events)
    fp = Fingerprint()
    for body, props in iter(events):
        fp.update(body, props)
    assert (fp.hexdigest(), fp.count) == (whole, count) == (whole, 3)
    assert fingerprint_of(list(reversed(events)))[0] != whole
    assert fingerprint_of([(b"a", {"x": 2}), *events[1:]])[0] != whole
    assert fingerprint_of([(b"ab", None)])[0] != fingerprint_of([(b"a", None), (b"b", None)])[0]


def test_fingerprint_of_look_alike_property_values_is_the_ledgers_own() -> None:
    """Kept canonical forms (a property's repeated values) never mix values that are equal as keys but not as
    JSON, and the digest is the one ledgers written before hold (a re-run must find the same content)."""
    events = [(b"a", {"x": 1}), (b"b", {"x": True}), (b"c", {"x": 1.0}), (b"d", {"x": "1"}), (b"e", {"x": -0.0}),
              (b"f", {"x": 0.0}), (b"g", {"x": None, "y": b"\x01"}), (b"h", None), (b"i", {"z": 2**40, "a": "\u00e9"}),
              (b"a", {"x": 1})]
    for _ in range(2):  # the second pass finds the kept forms
        assert fingerprint_of(events) == ("2ec70718b852846f7a9a52e862cdf06ec902816afdfac8ec39fd4a554f3b6804", 10)
    assert canonical_properties({"x": 1}) == b'{"x":1}' and canonical_properties({"x": True}) == b'{"x":true}'
    assert canonical_properties({"b": 1, "a": "x"}) == canonical_properties({"a": "x", "b": 1}) == b'{"a":"x","b":1}'


def test_ranges_round_trip() -> None:
    assert to_ranges([5, 1, 2, 3, 9]) == [[1, 4], [5, 6], [9, 10]]
    assert from_ranges([[1, 4], [9, 10]]) == [1, 2, 3, 9]


def test_state_document_checks_json_version_and_hub() -> None:
    state = ProducerState.new(KEY)
    assert ProducerState.from_json(state.to_json(), KEY, "blob x", "delete it").hub == "hub"
    for text, why in (("{", "not JSON"), ('{"version": 3}', "version 3, this provider reads versions 1, 2"),
                      (state.to_json().replace('"ledger"', '"committed"'), "misses or mangles field 'ledger'"),
                      (state.to_json().replace('"hub":"hub"', '"hub":"other"'), "belongs to hub")):
        with pytest.raises(InvalidProducerStateError, match=why):
            ProducerState.from_json(text, KEY, "blob x", "delete it")


def test_the_shared_claim_holds_no_backend_field_and_the_blob_claim_adds_its_lease() -> None:
    from airflow_provider_eh.publishing.blob_store import BlobStateClaim

    shared = StateClaim(KEY, ProducerState.new(KEY), None, "memory")
    assert set(vars(shared)) == {"key", "state", "tag", "where", "lost", "lost_reason", "held_until"}
    blob = BlobStateClaim(KEY, ProducerState.new(KEY), '"etag"', "blob c/x", lease="the lease client")
    assert set(vars(blob)) - set(vars(shared)) == {"lease", "renewal", "stop_renewal"} and blob.lease == "the lease client"


class MemoryStore(ProducerStateStore):
    """Single-process store: documents and ledger records in dicts."""

    def __init__(self) -> None:
        self.docs: dict[StateKey, str] = {}
        self.records: dict[tuple[StateKey, str, str], str] = {}

    def get_record(self, key: StateKey, kind: str, name: str) -> str | None:
        return self.records.get((key, kind, name))

    def put_record(self, claim: StateClaim, kind: str, name: str, text: str) -> None:
        self.records[(claim.key, kind, name)] = text

    def delete_record(self, claim: StateClaim, kind: str, name: str) -> None:
        self.records.pop((claim.key, kind, name), None)

    def describe(self, key: StateKey) -> str:
        return "memory"

    def reset_hint(self, key: StateKey) -> str:
        return "clear it"

    def read(self, key: StateKey) -> ProducerState | None:
        text = self.docs.get(key)
        return None if text is None else ProducerState.from_json(text, key, "memory", "clear it")

    def _acquire(self, key: StateKey) -> StateClaim:
        return StateClaim(key, self.read(key) or ProducerState.new(key), None, "memory")

    def write(self, claim: StateClaim, state: ProducerState) -> None:
        self.docs[claim.key] = state.to_json()
        claim.state = state

    def release(self, claim: StateClaim) -> None:
        pass


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> tuple[IdempotentPublisher, dict[str, Any]]:
    """A publisher over the memory store; the partition's 'log' is a dict the fake read-back consults."""
    log: dict[str, Any] = {"end": -1, "landed": {}, "steps": []}

    def read_back(*a: Any, **k: Any) -> dict[int, int]:
        log["steps"].append("read-back")
        return dict(log["landed"])

    monkeypatch.setattr(IdempotentPublisher, "_partition_end", lambda self, pid, producer=None: log["end"])
    monkeypatch.setattr(InDoubt, "fence", lambda self, key, level: log["steps"].append(f"fence {level}"))
    monkeypatch.setattr(in_doubt_module, "landed_stamps", read_back)
    endpoint = EventHubsEndpoint("ns.example", "hub", connection_string="Endpoint=sb://x/")
    return IdempotentPublisher(endpoint, MemoryStore(), producer_group="g"), log


def report(plan: Any, sent: int | None = None) -> SendReport:
    return SendReport(plan.partition_id, plan.batch_id, plan.event_count, plan.fingerprint,
                      plan.send_count if sent is None else sent, 99, 0.1)


def test_ledger_new_then_committed_batch_is_a_no_op(engine: Any) -> None:
    pub, _ = engine
    s = pub.begin("0", "b" * 64, 10, "fp")
    assert (s.plan.action, s.plan.first_seq, s.plan.send_count) == ("send", 0, 10)
    assert pub.store.read(s.key).pending.batch_id == "b" * 64
    result = pub.commit(s, report(s.plan))
    assert (result.first_seq, result.last_seq, result.events) == (0, 9, 10)
    assert result.readback_seconds is None  # nothing was in doubt, nothing read back
    again = pub.begin("0", "b" * 64, 10, "fp")
    assert again.plan.action == "done" and again.plan.result.status == "already_committed"
    assert again.plan.result.readback_seconds is None
    with pytest.raises(BatchContentChangedError):
        pub.begin("0", "b" * 64, 10, "other-fp")
    nxt = pub.begin("0", "c" * 64, 5, "fp2")
    assert nxt.plan.first_seq == 10


def test_ledger_pending_own_batch_resends_only_missing_with_fresh_sequence_numbers(engine: Any) -> None:
    pub, log = engine
    pub.begin("0", "b" * 64, 10, "fp")  # crashed after sending seq 0..3 of 0..9
    log["landed"] = {0: 0, 1: 1, 2: 2, 3: 3}
    r = pub.begin("0", "b" * 64, 10, "fp")
    assert r.plan.recovered_from == "pending" and r.plan.landed_count == 4
    # the new claim's owner level is raised at the hub before the read-back decides what to resend
    assert log["steps"] == [f"fence {r.plan.owner_level}", "read-back"] and r.plan.owner_level == 2
    assert r.plan.indexes == ((4, 10),) and r.plan.first_seq == 10  # above every number assigned before
    result = pub.commit(r, report(r.plan))
    assert (result.status, result.first_seq, result.last_seq, result.resent) == ("recovered", 0, 15, 6)
    assert result.readback_seconds is not None and result.readback_seconds >= 0  # the read-back's time, for the metrics
    pub.begin("0", "d" * 64, 3, "x")  # crashed again, with nothing landed
    log["landed"] = {}
    with pytest.raises(BatchContentChangedError, match="bump `generation`"):
        pub.begin("0", "d" * 64, 4, "y")


def test_ledger_other_runs_pending_becomes_partial_and_its_retry_sends_the_rest(engine: Any) -> None:
    pub, log = engine
    a = pub.begin("0", "a" * 64, 6, "fpa")  # run A crashed after its first 2 events landed
    started = pub.store.read(a.key).pending.started_at
    log["landed"] = {0: 0, 1: 1}
    b = pub.begin("0", "b" * 64, 3, "fpb")
    state = pub.store.read(b.key)
    assert state.partial["a" * 64].landed == [[0, 2]] and b.plan.first_seq == 6
    assert state.partial["a" * 64].started_at == started is not None  # its age counts from A's attempt
    assert pub.commit(b, report(b.plan)).readback_seconds is not None  # B read A's batch back to set it aside
    log["landed"] = {}
    a = pub.begin("0", "a" * 64, 6, "fpa")
    assert a.plan.recovered_from == "partial" and a.plan.indexes == ((2, 6),) and a.plan.first_seq == 9
    assert "a" * 64 not in pub.store.read(a.key).partial
    result = pub.commit(a, report(a.plan))
    assert (result.events, result.first_seq, result.last_seq) == (6, 0, 12)
    assert result.readback_seconds is None  # the partial record says what landed: no read-back


def test_commit_refuses_a_report_of_other_content(engine: Any) -> None:
    pub, _ = engine
    s = pub.begin("0", "b" * 64, 10, "fp")
    bad = SendReport("0", "b" * 64, 10, "not-fp", 10, 9, 0.1)
    with pytest.raises(BatchContentChangedError, match="not deterministic"):
        pub.commit(s, bad)
    assert pub.store.read(s.key).pending is not None


def commit_batches(pub: IdempotentPublisher, ids: list[str]) -> None:
    for batch_id in ids:
        s = pub.begin("0", batch_id, 1, "fp")
        pub.commit(s, report(s.plan))


def test_pruning_keeps_the_most_recent_batches_and_deletes_the_records_of_the_others(engine: Any) -> None:
    pub, _ = engine
    pub.keep_committed = 2
    commit_batches(pub, [str(i) * 64 for i in range(4)])
    state = pub.store.read(KEY)
    assert (state.ledger.first, state.ledger.next, state.committed_count) == (2, 4, 2)
    assert [r.batch_id for r in pub.store.history(KEY).batches] == ["3" * 64, "2" * 64]
    assert len(pub.store.records) == 4  # two batches kept, each by id and by ordinal
    assert pub.store.find_committed(KEY, "1" * 64) is None and pub.store.find_committed(KEY, "2" * 64).ordinal == 2
    again = pub.begin("0", "1" * 64, 1, "fp")  # forgotten: published again, as the README says pruning gives up
    assert again.plan.action == "send"


def test_an_unreadable_ledger_record_stops_the_publish_naming_the_record_and_what_to_do(engine: Any) -> None:
    pub, _ = engine
    commit_batches(pub, ["1" * 64, "2" * 64])  # "2" is the newest (found in the document); "1" only by its record
    pub.store.records[(KEY, "batch", "1" * 64)] = '{"events": 3, "first_seq"'  # cut short, as a failed restore leaves it
    with pytest.raises(InvalidProducerStateError) as caught:
        pub.begin("0", "1" * 64, 1, "fp")
    message = str(caught.value)
    assert f"batch record '{'1' * 64}' of memory" in message and "is not a committed batch" in message
    assert "Delete it to forget that batch" in message and "publishes it again" in message
    assert pub.store.read(KEY).pending is None  # nothing planned, so nothing sent
    pub.store.records[(KEY, "batch", "1" * 64)] = '{"events": 1, "first_seq": 0, "last_seq": 0, "service_last_sequence_number": 0}'
    with pytest.raises(InvalidProducerStateError, match="misses its batch_id or ordinal"):
        pub.begin("0", "1" * 64, 1, "fp")


def test_pruning_by_age_keeps_what_is_younger_and_always_the_newest(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pub, _ = engine
    commit_batches(pub, ["a" * 64, "b" * 64, "c" * 64])

    def committed_long_ago(*ordinals: int) -> None:
        for ordinal in ordinals:
            name = (KEY, "history", f"{ordinal:012d}")
            record = pub.store._record(KEY, "history", f"{ordinal:012d}")
            pub.store.records[name] = pub.store.records[name].replace(record.committed_at, "2020-01-01T00:00:00+00:00")

    committed_long_ago(0, 1)
    pub.keep_committed_days = 30
    commit_batches(pub, ["d" * 64])
    state = pub.store.read(KEY)
    assert (state.ledger.first, state.committed_count) == (2, 2)
    assert pub.store.find_committed(KEY, "a" * 64) is None and pub.store.find_committed(KEY, "c" * 64) is not None
    committed_long_ago(2, 3)
    commit_batches(pub, ["e" * 64])  # everything before it is old now
    assert [r.batch_id for r in pub.store.history(KEY).batches] == ["e" * 64]
    with pytest.raises(ValueError, match="keep_committed_days=0"):
        IdempotentPublisher(pub.endpoint, pub.store, producer_group="g", keep_committed_days=0)
    with pytest.raises(ValueError, match="keep_committed=0"):
        IdempotentPublisher(pub.endpoint, pub.store, producer_group="g", keep_committed=0)


def test_the_state_document_does_not_grow_with_history_and_pages_read_it_newest_first(engine: Any) -> None:
    pub, _ = engine
    commit_batches(pub, [f"{i:064x}" for i in range(3)])
    small = len(pub.store.docs[KEY])
    commit_batches(pub, [f"{i:064x}" for i in range(3, 250)])
    assert len(pub.store.docs[KEY]) <= small + 24  # only the counters' digits grow
    assert max(len(text) for text in pub.store.records.values()) < 400
    page = pub.store.history(KEY, limit=100)
    assert (page.total, len(page.batches), page.before) == (250, 100, 150)
    assert [r.ordinal for r in page.batches[:2]] == [249, 248] and page.batches[0].batch_id == f"{249:064x}"
    last = pub.store.history(KEY, before=50, limit=100)
    assert ([r.ordinal for r in last.batches][-1], len(last.batches), last.before) == (0, 50, None)
    del pub.store.records[(KEY, "history", f"{10:012d}")]  # a prune that crashed midway leaves a gap: skipped
    assert len(pub.store.history(KEY, before=20, limit=15).batches) == 14
    with pytest.raises(ValueError, match="1 to 1000"):
        pub.store.history(KEY, limit=0)


def test_a_commit_that_crashed_after_its_records_is_completed_by_the_next_claim(engine: Any) -> None:
    pub, log = engine
    s = pub.begin("0", "b" * 64, 10, "fp")

    class Crash(BaseException):
        pass

    def crash(step: str, count: int, detail: Any) -> None:
        if step == "after_commit_records":
            raise Crash()

    stop = observe(crash)
    with pytest.raises(Crash):
        pub.commit(s, report(s.plan))
    stop()
    state = pub.store.read(KEY)
    assert state.pending is not None and state.ledger.next == 0  # records written, the state not
    log["landed"] = {i: i for i in range(10)}
    again = pub.begin("0", "b" * 64, 10, "fp")
    assert again.plan.action == "done" and again.plan.result.status == "already_committed"
    state = pub.store.read(KEY)
    assert state.pending is None and (state.ledger.next, state.last_published_seq) == (1, 9)
    assert "read-back" not in log["steps"]  # the records said it all
    nxt = pub.begin("0", "c" * 64, 1, "fp")
    assert nxt.plan.first_seq == 10


def test_steps_reach_only_registered_observers_until_they_stop() -> None:
    seen: list[tuple[str, int]] = []
    reached("after_intent")  # nobody observes: nothing happens
    stop = observe(lambda step, count, _detail: seen.append((step, count)))
    reached("mid_send", 2)
    stop()
    reached("after_send")
    assert seen == [("mid_send", 2)]


def test_crash_at_kills_the_process_at_its_step_and_nowhere_else() -> None:
    def exit_code(point: str, steps: list[tuple[str, int]]) -> int:
        def child() -> None:
            crash_at(point)
            for step, count in steps:
                reached(step, count)

        return fork_run(child)

    assert exit_code("mid_send:2", [("after_intent", 0), ("mid_send", 1)]) == 0
    assert exit_code("mid_send:2", [("mid_send", 1), ("mid_send", 2), ("after_send", 0)]) == -signal.SIGKILL
    assert exit_code("during_commit", [("after_claim", 0), ("during_commit", 0)]) == -signal.SIGKILL


def test_an_unknown_crash_point_is_refused_naming_the_steps() -> None:
    with pytest.raises(ValueError, match="unknown step; choose one of after_claim, after_intent, before_send, mid_send"):
        crash_at("nowhere")
    with pytest.raises(ValueError, match="whole number"):
        crash_at("mid_send:x")


def test_property_ints_beyond_64_bits_are_refused_naming_the_event_and_field() -> None:
    pid, event = normalise({"body": b"x", "partition_id": "0", "properties": {"n": 2**63 - 1}}, 0, ["0"])
    assert event.properties == {"n": 2**63 - 1}
    with pytest.raises(InvalidEventError, match=r"event 3: field 'properties.n' is an int outside the signed 64-bit"):
        normalise({"body": b"x", "partition_id": "0", "properties": {"n": 2**63}}, 3, ["0"])
