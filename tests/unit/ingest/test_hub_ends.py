"""A run's partition ends: read again every interval, never moved back, a failed read keeps the last figure."""

from __future__ import annotations

import logging
import threading

import pytest

from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest.hub_ends import HubEnds
from airflow_provider_eh.ingest.limits import RunLimits


class _Hub:
    """Answers each partition's end from ``ends``; raises ``failing`` while it is set; counts reads."""

    def __init__(self, ends: dict[str, int]):
        self.ends = dict(ends)
        self.failing: Exception | None = None
        self.reads = 0
        self.read_twice = threading.Event()

    def read(self, partition_id: str) -> int:
        self.reads += 1
        if self.reads >= 2 * len(self.ends):
            self.read_twice.set()
        if self.failing is not None:
            raise self.failing
        return self.ends[partition_id]


def _refreshed(hub: _Hub) -> None:
    hub.reads, hub.read_twice = 0, threading.Event()
    assert hub.read_twice.wait(5), "the ends were not read again"


def test_the_first_figures_answer_until_a_refresh_then_the_hubs_newer_ones():
    hub = _Hub({"0": 10, "1": -1})
    ends = HubEnds(hub.read, {"0": 7, "1": -1}, interval=0.02, hub="orders")
    assert ends.lag("0", 5) == 2 and ends.get("1") == -1 and ends.lag("1", -1) == 0
    assert ends.get("9") is None and ends.lag("9", 3) is None  # a partition the run does not read
    ends.start()
    try:
        _refreshed(hub)
        assert ends.get("0") == 10 and ends.lag("0", 5) == 5 and ends.lag("0", 12) == 0
        hub.ends["1"] = 4
        _refreshed(hub)
        assert ends.get("1") == 4
    finally:
        ends.close()


def test_an_older_figure_never_replaces_a_newer_one():
    hub = _Hub({"0": 3})  # a read answered from a lagging replica, say
    ends = HubEnds(hub.read, {"0": 8}, interval=0.02).start()
    try:
        _refreshed(hub)
        assert ends.get("0") == 8
    finally:
        ends.close()


def test_a_failing_read_keeps_the_last_figure_and_is_logged_once(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="airflow_provider_eh.ingest.hub_ends")
    hub = _Hub({"0": 12, "1": 4})
    hub.failing = ConnectionError("link detached")
    ends = HubEnds(hub.read, {"0": 9, "1": 4}, interval=0.02, hub="orders").start()
    try:
        _refreshed(hub)
        _refreshed(hub)
        assert ends.get("0") == 9
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 1 and "partition 0 of 'orders'" in warnings[0] and "link detached" in warnings[0]
        hub.failing = None  # the next interval tries again
        _refreshed(hub)
        assert ends.get("0") == 12
    finally:
        ends.close()


def test_close_stops_the_reads():
    hub = _Hub({"0": 1})
    ends = HubEnds(hub.read, {"0": 1}, interval=0.02).start()
    _refreshed(hub)
    ends.close()
    reads = hub.reads
    threading.Event().wait(0.1)
    assert hub.reads == reads


def test_a_lag_interval_must_be_positive():
    with pytest.raises(SinkConfigError, match="lag_interval must be more than 0 seconds, not 0"):
        RunLimits(lag_interval=0)
