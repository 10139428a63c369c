"""The Event Hubs view's pure logic: lag in events and in time, staleness, consumer-group discovery, grouping."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from airflow_provider_eh.checkpoints.blob_layout import Checkpoint, CheckpointReader
from airflow_provider_eh.plugins.readers.consumers import consumer_row
from airflow_provider_eh.plugins.readers.lag import lag_events, lag_seconds
from airflow_provider_eh.plugins.readers.ledgers import group_ledgers, is_stale, summarise_state
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.records import CommittedBatch, Ledger, PartialBatch, PendingIntent

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=timezone.utc)


def test_lag_in_time_of_a_backlog_enqueued_before_the_checkpoint_is_the_age_of_the_oldest_unprocessed_event() -> None:
    # 100 events enqueued an hour ago; the consumer checkpointed the first 40 a minute ago and is 60 behind
    backlog_enqueued = NOW - timedelta(hours=1)
    checkpoint = Checkpoint("0", 39, "4000", NOW - timedelta(minutes=1), "ns/hub/g/checkpoint/0")
    row = consumer_row("0", 99, checkpoint, None, backlog_enqueued + timedelta(seconds=40), NOW)
    assert row["lag_events"] == 60
    assert row["lag_seconds"] == 3600 - 40  # not 0: the backlog is older than the checkpoint blob
    assert row["oldest_unprocessed_enqueued_at"] == (backlog_enqueued + timedelta(seconds=40)).isoformat()
    assert row["checkpointed_at"] == checkpoint.last_modified.isoformat()


def test_lag_counts_every_event_of_a_partition_never_checkpointed_and_is_zero_when_caught_up() -> None:
    assert lag_events(9, None) == 10
    assert lag_events(9, 9) == 0
    assert lag_events(9, 12) == 0  # partition properties read a moment before the checkpoint moved
    assert lag_seconds(0, None, NOW) == 0.0
    assert lag_seconds(3, None, NOW) is None  # behind, but the event's time could not be read
    assert lag_seconds(3, NOW + timedelta(seconds=2), NOW) == 0.0  # clocks a little apart


def test_an_open_batch_is_stale_only_when_older_than_the_threshold() -> None:
    assert is_stale(3601.0, 3600)
    assert not is_stale(3600.0, 3600)
    assert not is_stale(None, 0)
    assert is_stale(0.5, 0)


@dataclass
class Blob:
    name: str
    last_modified: datetime | None = None
    metadata: dict[str, str] | None = None
    etag: str = "0x1"


class Container:
    """A container's listing: ``list_blobs(name_starts_with=...)`` matches case-sensitively, as Azure Storage does."""

    container_name = "checkpoints"

    def __init__(self, names: list[str]):
        self.blobs = [Blob(n) for n in names]
        self.prefixes: list[str] = []

    def list_blobs(self, name_starts_with: str = "", **_: object) -> list[Blob]:
        self.prefixes.append(name_starts_with)
        return [b for b in self.blobs if b.name.startswith(name_starts_with)]


def hub_groups(container: Container, namespace: str, hub: str) -> list[str]:
    """The consumer groups the view lists for a hub: those its checkpoint reader finds in one pass."""
    return [group.consumer_group for group in CheckpointReader(container, namespace, hub).read_hub()]


def test_consumer_groups_are_discovered_under_every_sdks_spelling_of_a_namespace_with_a_port() -> None:
    container = Container([
        "127.0.0.1:5672/orders-eu/$default/checkpoint/0",    # Python: with the port, lower-cased
        "127.0.0.1/orders-eu/analytics/ownership/1",         # JavaScript: without the port
        "127.0.0.1:5672/Orders-EU/Reporting/Checkpoint/2",   # early Go: as configured
        "127.0.0.1:5672/Orders-EU/$Default/Checkpoint/1",    # the same group as Python's $default
        "127.0.0.1:5672/orders-eu-2/other/checkpoint/0",     # another hub sharing the prefix
        "127.0.0.1:5672/orders-eu/deep/checkpoint/0/extra",  # not the layout
        "127.0.0.1:5672/orders-eu/g1/producer-state/0",      # a producer state, not a consumer group
        "127.0.0.1:5672/orders-eu/empty/checkpoint/",
    ])
    assert hub_groups(container, "127.0.0.1:5672", "Orders-EU") == ["$default", "analytics", "Reporting"]
    assert len(container.prefixes) == 2  # one listing per spelling of the namespace


def test_consumer_groups_of_a_namespace_without_port_are_listed_once() -> None:
    container = Container(["ns.servicebus.windows.net/orders/$default/checkpoint/0",
                           "ns.servicebus.windows.net/orders/ANALYTICS/ownership/3"])
    assert hub_groups(container, "ns.servicebus.windows.net", "orders") == ["$default", "ANALYTICS"]
    assert container.prefixes == ["ns.servicebus.windows.net/orders/"]


def test_ledgers_are_grouped_by_producer_group_with_partitions_in_numeric_order() -> None:
    rows = [("b", {"partition": "10"}), ("a", {"partition": "2"}), ("b", {"partition": "2"}), ("b", {"partition": "x"})]
    assert group_ledgers(rows) == [
        {"group": "a", "partitions": [{"partition": "2"}]},
        {"group": "b", "partitions": [{"partition": "2"}, {"partition": "10"}, {"partition": "x"}]},
    ]


def test_a_ledger_summary_shows_the_last_committed_batch_the_pending_one_and_partial_ones_with_their_ages() -> None:
    state = ProducerState.new(StateKey("ns", "hub", "g", "3"))
    state.owner_level, state.last_published_seq = 4, 29
    # a version 1 document not claimed since the upgrade keeps its batches inside; a claimed one, in records
    unmigrated = ProducerState.new(StateKey("ns", "hub", "g", "3"))
    unmigrated.unmigrated = {
        "older": CommittedBatch(10, 0, 9, 9, committed_at="2026-05-04T10:00:00+00:00"),
        "newer": CommittedBatch(10, 10, 19, 19, committed_at="2026-05-04T11:00:00+00:00"),
    }
    state.ledger = Ledger(next=7, first=5, last=CommittedBatch(10, 10, 19, 19, committed_at="2026-05-04T11:00:00+00:00",
                                                                batch_id="newer", ordinal=6))
    state.pending = PendingIntent("p", 20, None, 5, "f", 4, 19, [], started_at=(NOW - timedelta(seconds=90)).isoformat())
    state.partial = {"q": PartialBatch(5, "f", [[0, 1], [3, 5]], origin={"dag_id": "d", "task_id": "t", "run_id": "r"})}
    modified = NOW - timedelta(minutes=10)
    summary = summarise_state(state, modified, NOW)
    assert (summary["partition"], summary["owner_level"], summary["next_sequence_number"]) == ("3", 4, 30)
    assert summary["last_committed"] == {"batch_id": "newer", "events": 10, "first_seq": 10, "last_seq": 19,
                                         "committed_at": "2026-05-04T11:00:00+00:00", "origin": None}
    assert summary["committed_batches"] == 2  # ordinals 5 and 6 are kept
    old = summarise_state(unmigrated, modified, NOW)
    assert (old["last_committed"], old["committed_batches"]) == (summary["last_committed"], 2)
    pending, partial = summary["open_batches"]
    assert (pending["kind"], pending["batch_id"], pending["events"], pending["age_seconds"]) == ("pending", "p", 5, 90.0)
    # landed ranges are [start, stop) event indexes: 0, then 3 and 4
    assert (partial["kind"], partial["batch_id"], partial["events"], partial["landed"]) == ("partial", "q", 5, 3)
    assert partial["origin"] == {"dag_id": "d", "task_id": "t", "run_id": "r"} and pending["origin"] is None
    assert partial["age_seconds"] == 600.0 and partial["since"] == modified.isoformat()


def test_the_cache_shares_a_value_until_it_expires_and_drops_the_least_recently_used() -> None:
    from airflow_provider_eh.plugins.cache import Cache

    loads: list[str] = []
    cache = Cache(ttl=None, size=2)
    for key in ("a", "b", "a", "c", "b"):
        cache.get(key, lambda key=key: loads.append(key) or key.upper())
    assert loads == ["a", "b", "c", "b"]  # "b" was the least recently used when "c" came
    expiring = Cache(ttl=0.0, size=2)
    expiring.get("a", lambda: loads.append("x"))
    expiring.get("a", lambda: loads.append("y"))
    assert loads[-2:] == ["x", "y"]
