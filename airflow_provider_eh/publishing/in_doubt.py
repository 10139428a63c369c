"""What a claim finds in doubt, and how it is settled before the next send.

A claim may find the state's ``pending`` intent of a run that crashed or stalled: its send may have
landed in full, in part or not at all. :class:`InDoubt` holds the steps that settle it, each against
the hub or the store: raise the hub's owner level first, so that a stalled sender of that intent
lands nothing from then on (:meth:`InDoubt.fence`); read back which of its events landed
(:meth:`InDoubt.landed`); record another run's intent as ``partial`` for that run's retry
(:meth:`InDoubt.set_aside`); or count a commit that crashed after its ledger record
(:meth:`InDoubt.complete_commit`). :func:`check_same_content` refuses a retry whose content changed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from airflow_provider_eh.client.fencing import HubFencing, open_fenced
from airflow_provider_eh.errors import BatchContentChangedError
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import StateKey
from airflow_provider_eh.publishing.landed import landed_stamps
from airflow_provider_eh.publishing.records import PartialBatch, PendingIntent, from_ranges, to_ranges
from airflow_provider_eh.publishing.state import ProducerStateStore
from airflow_provider_eh.stamps import batch_stamp

log = logging.getLogger(__name__)


def check_same_content(
    key: StateKey, batch_id: str, recorded: str | None, fingerprint: str, count: int, recorded_count: int
) -> None:
    """Raise :class:`BatchContentChangedError` when a batch's recorded fingerprint or count differs from this attempt's."""
    if recorded is not None and (recorded != fingerprint or recorded_count != count):
        raise BatchContentChangedError(
            f"{key}: batch {batch_stamp(batch_id)} was first published with {recorded_count} events of fingerprint "
            f"{recorded[:16]}, this attempt has {count} events of fingerprint {fingerprint[:16]}. Nothing was sent. "
            "The content of a batch must be the same on every retry; to publish the new content on purpose, "
            "bump `generation`."
        )


class InDoubt:
    """
    The settling steps of a publisher (its hub, store and fencing setting).

    :param endpoint: the hub.
    :param store: the producer state store.
    :param hub_fencing: the publisher's setting (``False``: no fence is raised).
    :param send_timeout: seconds the fencing attach may take.
    :param producer: makes a producer client of the hub (a context manager).
    """

    def __init__(self, endpoint: Any, store: ProducerStateStore, *, hub_fencing: HubFencing, send_timeout: float,
                 producer: Callable[..., Any]):
        self.endpoint = endpoint
        self.store = store
        self.hub_fencing = hub_fencing
        self.send_timeout = send_timeout
        self.producer = producer

    def fence(self, key: StateKey, owner_level: int) -> None:
        """Raise the hub's owner level of the group on the partition (before a read-back, or to prove it can be).

        A publisher that stalled with an SDK batch in flight must not land it after the read-back
        decided what to resend: from this attach on, the hub refuses its sends (where it offers
        idempotent producers; otherwise the stalled one's claim deadline is the only fence). With
        ``hub_fencing="required"``, a hub or an SDK that cannot fence raises here.
        """
        if self.hub_fencing is False:
            return
        with self.producer(retry_total=0) as client:
            fence = open_fenced(client, key.partition, group=key.group, owner_level=owner_level,
                                send_timeout=self.send_timeout, mode=self.hub_fencing)
        log.info("group %s partition %s: %s", key.group, key.partition,
                 f"owner level {owner_level} raised at the hub" if fence is not None else "no hub fencing (not offered)")

    def landed(self, key: StateKey, claim: StateClaim, pending: PendingIntent) -> tuple[set[int], float]:
        """Indexes of ``pending``'s attempt that landed, by reading the partition back, and the seconds the read took."""
        started = time.monotonic()
        found = landed_stamps(
            self.endpoint, key.partition, after_sequence_number=int(pending.start_sequence_number),
            group=key.group, batch_stamp=batch_stamp(pending.batch_id),
        )
        seconds = time.monotonic() - started
        claim.check()
        attempt = pending.attempt_indexes
        first = int(pending.first_seq)
        return {attempt[s - first] for s in found if 0 <= s - first < len(attempt)}, seconds

    def set_aside(self, key: StateKey, claim: StateClaim, pending: PendingIntent, batch_id: str) -> float:
        """Record another run's in-doubt intent as ``partial`` (what landed of it), for that run's retry to finish;
        the seconds its read-back took."""
        state = claim.state
        found, seconds = self.landed(key, claim, pending)
        theirs = found | set(from_ranges(pending.landed))
        state.partial[pending.batch_id] = PartialBatch(
            events=pending.events, fingerprint=pending.fingerprint, landed=to_ranges(theirs),
            batch_first_seq=pending.first_of_batch, origin=pending.origin, started_at=pending.started_at,
        )
        state.last_published_seq = max(state.last_published_seq, pending.assigned_end)
        state.pending = None
        self.store.write(claim, state)
        log.info(
            "group %s partition %s batch %s: resolved in-doubt batch %s of another run as partial: "
            "%d of %d events landed; its retry will send the rest",
            key.group, key.partition, batch_stamp(batch_id), batch_stamp(pending.batch_id), len(theirs), pending.events,
        )
        return seconds

    def complete_commit(self, key: StateKey, claim: StateClaim, pending: PendingIntent) -> bool:
        """A pending intent whose batch has its committed records: a commit that crashed between writing them
        and writing the state. Count it (the state written now); whether it was one."""
        record = self.store.find_committed(key, pending.batch_id)
        state = claim.state
        if record is None or record.ordinal is None or record.ordinal < state.ledger.next:
            return False
        state.count_committed(record, pending.assigned_end)
        self.store.write(claim, state)
        log.info("group %s partition %s batch %s: its commit had written the ledger record, not the state; completed",
                 key.group, key.partition, batch_stamp(pending.batch_id))
        return True
