"""The batches a ledger holds open, and how old they are: what the Event Hubs view and the health check show.

A partition's state holds at most one ``pending`` batch (an intent written before a send: its run
crashed, stalled or is sending now) and any number of ``partial`` ones (another run's in-doubt batch,
set aside with what of it landed, until its own run's retry sends the rest). Each stays open until a
publish of that batch commits it. Its age counts from when the attempt that left it open started
(``started_at``); a record written before that time was kept counts from ``modified`` when the caller
knows when the state was last written (a blob's last-modified time), else its age is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from airflow_provider_eh.publishing.document import ProducerState
from airflow_provider_eh.publishing.records import parse_time, ranges_len


@dataclass(frozen=True)
class OpenBatch:
    """
    A batch of one partition's ledger that no publish has committed yet.

    :param group: its producer group.
    :param partition: its partition.
    :param kind: ``"pending"`` (its intent: a send started) or ``"partial"`` (in doubt, set aside for its own run).
    :param batch_id: the batch id.
    :param events: events in the batch.
    :param landed: events known to have landed (a partial batch's; ``None`` for a pending one: not read back yet).
    :param since: when it was opened, ``None`` when not known.
    :param origin: what published it (``{"dag_id", "task_id", "run_id", "map_index", "try_number"}`` from the
        operators), ``None`` when not recorded.
    """

    group: str
    partition: str
    kind: Literal["pending", "partial"]
    batch_id: str
    events: int
    landed: int | None
    since: datetime | None
    origin: dict[str, Any] | None = None

    def age_seconds(self, now: datetime) -> float | None:
        """Seconds it has been open at ``now`` (to a tenth), ``None`` when not known."""
        return None if self.since is None else round((now - self.since).total_seconds(), 1)


def open_batches(state: ProducerState, modified: datetime | None = None) -> list[OpenBatch]:
    """The open batches of ``state``: the pending one first, then the partial ones by batch id.

    :param modified: when the state was last written, if known: the age of a batch whose record has no
        start time (written by an earlier release) counts from it.
    """
    found = []
    if state.pending is not None:
        pending = state.pending
        found.append(OpenBatch(state.group, state.partition, "pending", pending.batch_id, pending.events, None,
                               parse_time(pending.started_at) or modified, pending.origin))
    for batch_id, part in sorted(state.partial.items()):
        found.append(OpenBatch(state.group, state.partition, "partial", batch_id, part.events, ranges_len(part.landed),
                               parse_time(part.started_at) or modified, part.origin))
    return found


def is_stale(age_seconds: float | None, threshold: float) -> bool:
    """An open batch is stale once it is older than the threshold (seconds); one of unknown age is not."""
    return age_seconds is not None and age_seconds > threshold
