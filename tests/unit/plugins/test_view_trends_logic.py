"""The view's trends, pure logic: buckets and their blob names, pruning, thinning a lag series, the volume's
reading plan and sums, and the sampling settings' checks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_provider_eh.errors import ViewReadError
from airflow_provider_eh.plugins.sampler import SamplingSettings
from airflow_provider_eh.plugins.samples import (
    Sample,
    blob_name,
    bucket_of,
    bucket_start,
    encode,
    expired,
    hub_prefix,
    lag_series,
    step_for,
)
from airflow_provider_eh.plugins.trends import MAX_BARS, bar_seconds
from airflow_provider_eh.plugins.volume import BUCKET_SECONDS, LedgerVolume, plan

NOW = datetime(2026, 11, 28, 9, 31, 42, tzinfo=UTC)


def test_a_moment_falls_in_the_bucket_that_starts_at_the_last_whole_interval_and_its_blob_names_it() -> None:
    assert bucket_start(NOW, 60) == datetime(2026, 11, 28, 9, 31, tzinfo=UTC)
    assert bucket_start(NOW, 300) == datetime(2026, 11, 28, 9, 30, tzinfo=UTC)
    assert bucket_start(NOW.replace(tzinfo=None), 60) == bucket_start(NOW, 60)  # naive times are UTC
    name = blob_name("NS.servicebus.windows.net", "Orders", bucket_start(NOW, 60))
    assert name == "_samples/ns.servicebus.windows.net/orders/lag/20261128t0931z"
    assert name.startswith(hub_prefix("NS.servicebus.windows.net", "Orders"))
    assert bucket_of(name) == datetime(2026, 11, 28, 9, 31, tzinfo=UTC)
    assert bucket_of("_samples/ns/orders/lag/not-a-bucket") is None


def test_buckets_older_than_the_retention_are_the_ones_pruned() -> None:
    names = [blob_name("ns", "h", NOW - timedelta(minutes=m)) for m in range(0, 30 * 60, 60)]  # hourly, 30 h back
    old = expired([*names, "_samples/ns/h/lag/stray"], NOW, timedelta(hours=25))
    assert sorted(old) == sorted(n for n in names if bucket_of(n) < NOW - timedelta(hours=25))
    assert len(old) == 5 and len(names) - len(old) == 25  # 25 h kept, hour 0 included
    assert expired(names, NOW, timedelta(hours=48)) == []


def _sample(minute: int, lags: dict[str, dict[str, int]]) -> Sample:
    at = NOW - timedelta(minutes=minute)
    groups = [{"consumer_group": g, "partitions": [{"partition": p, "lag_events": n, "lag_seconds": float(n)}
                                                   for p, n in parts.items()]} for g, parts in lags.items()]
    return Sample.decode(bucket_start(at, 60), encode(at, 60, groups))


def test_a_lag_series_has_a_point_per_sample_or_the_highest_of_each_step_when_thinned() -> None:
    samples = [_sample(m, {"b": {"10": m, "2": 1}, "A": {"0": 0}}) for m in range(10)]
    series = lag_series(samples, 60)
    assert [g["consumer_group"] for g in series] == ["A", "b"]  # groups by name, any case
    assert [p["partition"] for p in series[1]["partitions"]] == ["2", "10"]  # partitions in numeric order
    points = series[1]["partitions"][1]["points"]
    assert [p[1] for p in points] == list(reversed(range(10)))  # oldest first, one per sample
    assert points[-1] == [(NOW).isoformat(), 0, 0.0]
    thinned = lag_series(samples, 300)[1]["partitions"][1]["points"]
    steps = {bucket_start(datetime.fromisoformat(p[0]), 300) for p in thinned}
    assert len(thinned) == len(steps) == len({bucket_start(s.bucket, 300) for s in samples})
    assert max(p[1] for p in thinned) == 9  # the peak survives the thinning


def test_a_chart_step_keeps_a_day_of_minute_samples_to_a_few_hundred_points() -> None:
    assert step_for(timedelta(hours=1), 60) == 60
    assert step_for(timedelta(hours=24), 60) == 240 and 24 * 3600 / 240 <= 360
    assert bar_seconds(timedelta(hours=24)) % BUCKET_SECONDS == 0
    assert 24 * 3600 / bar_seconds(timedelta(hours=24)) <= MAX_BARS
    assert bar_seconds(timedelta(hours=1)) == BUCKET_SECONDS


def test_the_volume_plan_reads_new_batches_first_then_older_ones_within_the_budget() -> None:
    # a ledger never read: its newest records, as many as the budget
    assert plan(100, 100, False, 0, 100, 30) == (range(100, 100), range(70, 100), False)
    # read from 70 to 99; 5 new batches since: those, then 25 older ones
    assert plan(100, 70, False, 0, 105, 30) == (range(100, 105), range(45, 70), False)
    # the older end reached: new batches only
    assert plan(105, 45, True, 0, 107, 30) == (range(105, 107), range(0), False)
    # never below the oldest record kept
    assert plan(100, 10, False, 5, 100, 30) == (range(100, 100), range(5, 10), False)
    # more new batches than a request reads, or a ledger reset: start again from the newest
    assert plan(100, 70, False, 0, 200, 30) == (range(170, 200), range(0), True)
    assert plan(100, 70, False, 0, 50, 30) == (range(20, 50), range(0), True)


@dataclass(frozen=True)
class Record:
    events: int
    committed_at: str | None


def test_a_ledgers_volume_adds_its_records_per_bucket_and_stops_at_the_horizon() -> None:
    volume = LedgerVolume(10, 10)
    horizon = NOW - timedelta(hours=25)
    records = [Record(5, NOW.isoformat()), Record(7, (NOW - timedelta(seconds=30)).isoformat()),
               Record(1, (NOW - timedelta(hours=1)).isoformat()), Record(9, None)]
    assert volume.add(records, horizon) is False
    slot = int(NOW.timestamp()) - int(NOW.timestamp()) % BUCKET_SECONDS
    assert volume.buckets[slot] == [12, 2]
    assert sum(e for e, _ in volume.buckets.values()) == 13 and sum(b for _, b in volume.buckets.values()) == 3
    assert volume.add([Record(4, (horizon - timedelta(seconds=1)).isoformat())], horizon) is True  # older: the end
    assert sum(e for e, _ in volume.buckets.values()) == 13
    volume.forget_before(NOW - timedelta(minutes=30))
    assert list(volume.buckets) == [slot]


def test_sampling_is_off_by_default_and_a_bad_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for option in ("LAG_SAMPLING", "LAG_SAMPLE_INTERVAL", "LAG_SAMPLE_RETENTION_HOURS", "LAG_SAMPLES_CONTAINER",
                   "VIEW_HISTORY_READ_SECONDS"):
        monkeypatch.delenv(f"AIRFLOW__AZURE_EVENT_HUBS__{option}", raising=False)
    settings = SamplingSettings.from_conf()
    assert (settings.enabled, settings.interval, settings.retention, settings.container, settings.history_read_seconds) == (
        False, 60.0, timedelta(hours=25), None, 1.0)
    monkeypatch.setenv("AIRFLOW__AZURE_EVENT_HUBS__LAG_SAMPLING", "True")
    monkeypatch.setenv("AIRFLOW__AZURE_EVENT_HUBS__LAG_SAMPLE_INTERVAL", "300")
    monkeypatch.setenv("AIRFLOW__AZURE_EVENT_HUBS__LAG_SAMPLES_CONTAINER", "view-samples")
    settings = SamplingSettings.from_conf()
    assert (settings.enabled, settings.interval, settings.container) == (True, 300.0, "view-samples")
    for option, value in (("LAG_SAMPLE_INTERVAL", "5"), ("LAG_SAMPLE_INTERVAL", "often"),
                          ("LAG_SAMPLE_RETENTION_HOURS", "0"), ("LAG_SAMPLING", "maybe"),
                          ("VIEW_HISTORY_READ_SECONDS", "0")):
        with monkeypatch.context() as m:
            m.setenv(f"AIRFLOW__AZURE_EVENT_HUBS__{option}", value)
            with pytest.raises(ViewReadError, match=rf"\[azure_event_hubs\] {option.lower()} = '{value}'"):
                SamplingSettings.from_conf()


class _Ledgers:
    """Ledgers of one hub as the volume reads them: ``per`` committed batches each, one a minute up to NOW, and
    a clock that moves ``read_cost`` seconds at each page of history read."""

    def __init__(self, count: int, per: int, clock: list[float], read_cost: float):
        from airflow_provider_eh.publishing.records import CommittedBatch, HistoryPage, Ledger

        self.count, self.per, self.clock, self.read_cost = count, per, clock, read_cost
        self.pages = 0
        self.read: list[str] = []  # the groups whose history was read, in order
        self._page, self._batch, self._ledger = HistoryPage, CommittedBatch, Ledger

    def blobs(self) -> list[Any]:
        from airflow_provider_eh.plugins.readers.ledgers import StateBlob

        return [StateBlob(f"group-{i}", "0", NOW, "etag") for i in range(self.count)]

    def state(self, group: str) -> Any:
        return _State(group, self._ledger(next=self.per, first=0))

    def history(self, key: Any, before: int, limit: int, state: Any) -> Any:
        self.pages += 1
        self.read.append(key.group)
        self.clock[0] += self.read_cost
        batches = [self._batch(events=10, first_seq=o * 10, last_seq=o * 10 + 9, service_last_sequence_number=o * 10 + 9,
                               fingerprint="f", owner_level=1, ordinal=o,
                               committed_at=(NOW - timedelta(minutes=self.per - o)).isoformat())
                   for o in range(max(0, before - limit), before)][::-1]
        return self._page(batches, self.per, None)


@dataclass
class _State:
    group: str
    ledger: Any


def test_an_answer_starts_no_ledgers_reads_after_its_time_and_the_next_goes_on_with_those_read_longest_ago(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_eh.plugins import volume

    clock = [1000.0]
    ledgers = _Ledgers(count=6, per=20, clock=clock, read_cost=1.0)
    endpoint = type("Endpoint", (), {"namespace": "ns", "eventhub_name": "orders"})()
    reading = type("Reading", (), {"source": type("Source", (), {"state_container": "state"})(), "endpoint": endpoint})()
    container = type("Container", (), {"url": "http://unit/volume-deadline"})()
    monkeypatch.setattr(volume, "blob_states", lambda r: (container, ledgers, ledgers.blobs()))
    monkeypatch.setattr(volume, "read_states", lambda r, c, s, blobs, threads: [(b, ledgers.state(b.group), None) for b in blobs])
    monkeypatch.setattr(volume, "LEDGER_THREADS", 1)
    monkeypatch.setattr(volume.time, "monotonic", lambda: clock[0])
    volume._LEDGERS.clear()

    def answer() -> dict:  # 60 records an answer: 10 of each ledger's 20
        return volume.published_volume(reading, NOW, NOW - timedelta(hours=24), 300, budget=60, read_seconds=2.5)

    def events(body: dict) -> int:
        return sum(b[1] for g in body["producer_groups"] for b in g["buckets"])

    first = answer()  # each page read costs a second: three ledgers are started within 2.5 s, the others wait
    assert first["complete"] is False and ledgers.read == ["group-0", "group-1", "group-2"]
    assert first["records_read"] == 30 and events(first) == 30 * 10
    second = answer()  # the ledgers never read go before the older records of those read
    assert second["complete"] is False and ledgers.read[3:] == ["group-3", "group-4", "group-5"]
    assert events(second) == 60 * 10
    third, fourth = answer(), answer()  # then each ledger's older half, those read longest ago first
    assert ledgers.read[6:] == ["group-0", "group-1", "group-2", "group-3", "group-4", "group-5"]
    assert third["complete"] is False
    assert fourth["complete"] is True and events(fourth) == 6 * 20 * 10
    fifth = answer()  # nothing left to read: no read, no bound
    assert fifth["complete"] is True and fifth["records_read"] == 0 and len(ledgers.read) == 12



def test_the_time_an_answer_spends_downloading_producer_states_counts_against_its_history_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold answer downloads every producer state first: when that took the answer's time, it reads no history
    record and says it is not complete; the next answer, its states kept, reads them."""
    from airflow_provider_eh.plugins import volume

    clock = [1000.0]
    ledgers = _Ledgers(count=2, per=4, clock=clock, read_cost=0.1)
    endpoint = type("Endpoint", (), {"namespace": "ns", "eventhub_name": "orders"})()
    reading = type("Reading", (), {"source": type("Source", (), {"state_container": "state"})(), "endpoint": endpoint})()
    container = type("Container", (), {"url": "http://unit/volume-cold"})()
    downloads = [3.0, 0.0]  # the first answer's state downloads take 3 s, the next's nothing (kept)

    def read_states(r: object, c: object, s: object, blobs: list, threads: int) -> list:
        clock[0] += downloads.pop(0)
        return [(b, ledgers.state(b.group), None) for b in blobs]

    monkeypatch.setattr(volume, "blob_states", lambda r: (container, ledgers, ledgers.blobs()))
    monkeypatch.setattr(volume, "read_states", read_states)
    monkeypatch.setattr(volume.time, "monotonic", lambda: clock[0])
    volume._LEDGERS.clear()

    def answer() -> dict:
        return volume.published_volume(reading, NOW, NOW - timedelta(hours=24), 300, read_seconds=2.5)

    first = answer()
    assert first["complete"] is False and first["records_read"] == 0 and ledgers.read == []
    second = answer()
    assert second["complete"] is True and second["records_read"] == 8 and sorted(ledgers.read) == ["group-0", "group-1"]


def test_a_windows_lag_series_is_thinned_once_for_the_same_samples_and_again_when_one_comes() -> None:
    from airflow_provider_eh.plugins import trends

    trends._SERIES.clear()
    store = type("Store", (), {"container": type("Container", (), {"url": "http://unit/series"})(), "prefix": "_samples/ns/h/lag/"})()

    def sample(minutes: int, lag: int) -> Sample:
        at = NOW - timedelta(minutes=minutes)
        return Sample.decode(bucket_start(at, 60), encode(at, 60, [
            {"consumer_group": "g", "partitions": [{"partition": "0", "lag_events": lag, "lag_seconds": 1.0}]}]))

    day = [sample(m, m % 7) for m in range(30, 0, -1)]
    first = trends.window_series(store, day, 60.0)
    assert first == lag_series(day, 60.0)
    assert trends.window_series(store, list(day), 60.0) is first  # the same samples: kept
    later = trends.window_series(store, [*day[1:], sample(0, 99)], 60.0)  # one left the window, one came
    assert later is not first and later[0]["partitions"][0]["points"][-1][1] == 99
    assert trends.window_series(store, day, 120.0) == lag_series(day, 120.0)  # another step: thinned for it
