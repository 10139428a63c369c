"""What the reader's driver asks the hub: each partition's state, and the sequence number at an enqueued time.

The driver plans every range before a task runs (:mod:`.offsets`): from ``get_partition_properties``
of each partition, one management request each, and, for a position given as an enqueued time, the
first event enqueued at or after it, received once from the partition (the service filters by time;
only the event says its sequence number).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from airflow_provider_eh.client import sdk_internals
from airflow_provider_eh.errors import IngestStalledError
from airflow_provider_eh.spark.datasource.offsets import PartitionState, resolve
from airflow_provider_eh.spark.datasource.positions import TIME, Position
from airflow_provider_eh.spark.datasource.read_options import ReadOptions


class Hub:
    """The driver's view of the hub; close it (a context manager).

    The management requests go through the package's producer client (:mod:`~airflow_provider_eh.client.single_connection`:
    one kept management link on the process's shared connection), a few milliseconds each where the SDK's
    consumer client opens a link per request (about 0.4 s each, per partition and per trigger). The consumer
    client is opened only to resolve an enqueued time.
    """

    def __init__(self, options: ReadOptions):
        self.options = options
        self._client = options.endpoint.producer()
        self._consumer: Any = None

    def __enter__(self) -> Hub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()
        if self._consumer is not None:
            self._consumer.close()

    def partition_ids(self) -> list[str]:
        return [str(p) for p in self._client.get_partition_ids()]

    def states(self, partition_ids: list[str] | None = None) -> dict[str, PartitionState]:
        """Each partition's state now (all the hub's partitions when ``partition_ids`` is ``None``)."""
        ids = self.partition_ids() if partition_ids is None else partition_ids
        return {p: PartitionState.of_properties(self._client.get_partition_properties(p)) for p in ids}

    def positions(self, states: Mapping[str, PartitionState], position_of: Callable[[str], Position], *,
                  start: bool) -> dict[str, int]:
        """The next sequence number each partition's position means (``start``: the first read; else the first not)."""
        found: dict[str, int] = {}
        for p, state in states.items():
            position = position_of(p)
            resolved = resolve(position, state, start=start)
            if resolved is None and position.kind == TIME:
                assert position.enqueued_time is not None
                resolved = self.first_at(state, position.enqueued_time)
            assert resolved is not None
            found[p] = resolved
        return found

    def first_at(self, state: PartitionState, when: datetime) -> int:
        """The sequence number of the partition's first event enqueued at or after ``when`` (its end when none is)."""
        if state.last_enqueued_time is None or state.last_enqueued_time < when:
            return state.end
        received: list[Any] = []
        if self._consumer is None:
            self._consumer = self.options.endpoint.consumer(self.options.consumer_group)
        consumer = sdk_internals.create_consumer(self._consumer, self.options.consumer_group, state.partition_id, when,
                                                 received.extend, event_position_inclusive=True, prefetch=1)
        deadline = time.monotonic() + self.options.receive_timeout
        try:
            while not received:
                if time.monotonic() > deadline:
                    raise IngestStalledError(
                        f"partition {state.partition_id}: no event enqueued at or after {when.isoformat()} came in "
                        f"{self.options.receive_timeout:g} s, though the hub reports its last at "
                        f"{state.last_enqueued_time.isoformat()}; raise option 'receiveTimeout'")
                consumer.receive(batch=True, max_batch_size=1, max_wait_time=2)
        finally:
            consumer.close()
        return int(received[0].sequence_number)
