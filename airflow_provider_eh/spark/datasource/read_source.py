"""The reading side of the ``eventhubs`` data source: PySpark 4's batch and streaming reader classes.

::

    spark.dataSource.register(EventHubsDataSource)
    df = (spark.read.format("eventhubs").option("connectionString", ...)
          .option("startingPosition", '{"enqueuedTime": "2026-05-01T00:00:00Z"}')
          .option("endingPosition", '{"enqueuedTime": "2026-05-02T00:00:00Z"}').load())
    stream = spark.readStream.format("eventhubs").option("connectionString", ...).load()

The driver plans: each partition's range of sequence numbers, from the hub's partition properties
(:mod:`.hub_state`) and the limits (:mod:`.offsets`); one Spark input partition per Event Hubs partition
with events to read. The executors read their ranges (:mod:`.ranges`). A stream's offsets are each
partition's next sequence number, kept by Spark in the query's checkpoint; with a sink that writes each
micro-batch once (Spark's file sink, ``foreachBatch`` keyed by the batch id), the query holds each event
once across restarts. Nothing here imports Apache Airflow.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from airflow_provider_eh.errors import DataSourceOptionError
from airflow_provider_eh.spark.datasource.options import pyspark_missing

try:
    from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError as exc:  # PySpark classes, as source.py's
    raise pyspark_missing(exc) from exc

from airflow_provider_eh.spark.datasource.hub_state import Hub
from airflow_provider_eh.spark.datasource.offsets import PartitionState, check_offset, plan_end
from airflow_provider_eh.spark.datasource.positions import LATEST, TIME
from airflow_provider_eh.spark.datasource.ranges import EventRange, read_range, read_schema
from airflow_provider_eh.spark.datasource.read_options import ReadOptions

log = logging.getLogger(__name__)

#: a per-partition limit without a total: the total Spark is told (it then passes it back)
_NO_TOTAL = 2**62


class EventHubsPartition(InputPartition):
    """One Spark task's input: a partition's range of sequence numbers."""

    def __init__(self, event_range: EventRange):
        super().__init__(event_range.partition_id)
        self.range = event_range


def spark_schema(options: ReadOptions) -> Any:
    """The rows' Spark schema (:func:`~.ranges.read_schema`'s, converted)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(read_schema(options), prefer_timestamp_ntz=False)


def _inputs(start: dict[str, int], end: dict[str, int]) -> list[EventHubsPartition]:
    ranges = [EventRange(p, start[p], e) for p, e in end.items() if p in start and e > start[p]]
    return [EventHubsPartition(r) for r in ranges]


class EventHubsBatchReader(DataSourceReader):
    """``spark.read.format("eventhubs")``: each partition from its starting to its ending position, as planned once."""

    def __init__(self, options: ReadOptions):
        self.options = options
        with Hub(options) as hub:
            states = hub.states()
            wanted = set(options.starting) | set(options.ending)
            unknown = sorted(wanted - set(states))
            if unknown:
                raise DataSourceOptionError(f"options 'startingPositions'/'endingPositions' name partition {', '.join(unknown)}, "
                                 f"which hub {options.endpoint.eventhub_name!r} does not have (it has "
                                 f"{', '.join(states)})")
            self.start = hub.positions(states, options.start_of, start=True)
            self.end = hub.positions(states, options.end_of, start=False)
        log.info("hub %s: reading %s", options.endpoint.eventhub_name,
                 "; ".join(f"partition {p}: {self.start[p]} to {self.end[p] - 1}" for p in self.start) or "nothing")

    def partitions(self) -> Sequence[InputPartition]:
        return _inputs(self.start, self.end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, EventHubsPartition)
        yield from read_range(self.options, partition.range)


class EventHubsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("eventhubs")``: micro-batches of each partition's next events, admission-controlled."""

    def __init__(self, options: ReadOptions):
        self.options = options
        self._hub: Hub | None = None
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow: the ends when the query started
        self._states: dict[str, PartitionState] = {}
        self._bounds: dict[str, int] = {}  # ending positions resolved for good
        self._writer: Any = None

    def __getstate__(self) -> dict[str, Any]:  # the executors get the options only
        return {"options": self.options, "_hub": None, "_target": None, "_states": {}, "_bounds": {}, "_writer": None}

    def _hub_now(self) -> Hub:
        if self._hub is None:
            self._hub = Hub(self.options)
        return self._hub

    def _refresh(self) -> dict[str, PartitionState]:
        self._states = self._hub_now().states()
        return self._states

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (Spark's names)
        states = self._refresh()
        return self._hub_now().positions(states, self.options.start_of, start=True)

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.options.max_events_per_trigger is None and self.options.max_events_per_partition is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_events_per_trigger or _NO_TOTAL)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._target = {p: s.end for p, s in self._refresh().items()}
        log.info("hub %s: Trigger.AvailableNow reads up to %s", self.options.endpoint.eventhub_name, self._target)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        begin = check_offset(start, "the query's start offset")
        states = self._refresh()
        self._checkpoint(begin)  # Spark asks from ``start`` once every micro-batch before it is in the sink
        bounds = self._ending(states)
        if isinstance(limit, ReadAllAvailable):
            return plan_end(begin, states, target=self._target, bounds=bounds)
        total = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return plan_end(begin, states, max_total=None if total == _NO_TOTAL else total,
                        max_per_partition=self.options.max_events_per_partition, target=self._target, bounds=bounds)

    def _ending(self, states: dict[str, PartitionState]) -> dict[str, int]:
        """Where ``endingPosition(s)`` stop each partition that has one (``latest``: none, the stream goes on).

        An enqueued time the partition has not reached yet bounds it at its end for now, and is asked again
        next time: events enqueued before it may still come.
        """
        found = dict(self._bounds)
        for p, state in states.items():
            position = self.options.end_of(p)
            if p in found or position.kind == LATEST:
                continue
            if position.kind == TIME and position.enqueued_time is not None and (
                    state.last_enqueued_time is None or state.last_enqueued_time < position.enqueued_time):
                found[p] = state.end
                continue
            found[p] = self._bounds[p] = self._hub_now().positions({p: state}, self.options.end_of, start=False)[p]
        return found

    def reportLatestOffset(self) -> dict[str, int] | None:  # noqa: N802
        return {p: s.end for p, s in self._states.items()} or None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        begin = check_offset(start, "the micro-batch's start offset")
        new = [p for p in end if p not in begin]
        if new:  # partitions added to the hub since the start offset: from their beginning
            states = self._states if all(p in self._states for p in new) else self._refresh()
            begin.update({p: states[p].beginning for p in new if p in states})
        return _inputs(begin, check_offset(end, "the micro-batch's end offset"))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, EventHubsPartition)
        yield from read_range(self.options, partition.range)

    def commit(self, end: dict[str, int]) -> None:
        self._checkpoint(check_offset(end, "the committed offset"))

    def _checkpoint(self, done: dict[str, int]) -> None:
        """With ``checkpointContainer``: the consumer group's checkpoints at ``done``, the query's next start.

        Spark calls ``commit`` for a micro-batch only when it starts the next one, so a query with nothing new
        to read would leave its last micro-batch out of the checkpoints for as long; ``latestOffset(start)`` comes
        once every micro-batch up to ``start`` is in the sink, and writes them too (a partition's checkpoint is
        written only when it moved).
        """
        if self.options.checkpoints is None:
            return
        from airflow_provider_eh.spark.datasource.consumer_checkpoints import CheckpointWriter

        if self._writer is None:
            self._writer = CheckpointWriter(self.options)
        known = {p: (s.end - 1, s.last_offset) for p, s in self._states.items()}
        self._writer.write(done, known)

    def stop(self) -> None:
        if self._hub is not None:
            hub, self._hub = self._hub, None
            hub.close()
