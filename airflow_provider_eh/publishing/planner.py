"""What :meth:`~airflow_provider_eh.publishing.publisher.IdempotentPublisher.begin` does under a partition's claim.

The ledger is settled first: a pending intent whose commit landed is completed, one of another batch is set
aside, and a batch already committed is answered from its record (nothing to send). Otherwise the plan is
written as the intent before anything is sent: every event of a fresh batch, or, when this batch was in
doubt (``pending``) or partly sent before (``partial``), only the events the read-back did not find, with
fresh sequence numbers above the highest ever assigned to the batch (see ``publisher``'s docstring).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.client.fencing import REQUIRED, HubFencing
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import StateKey
from airflow_provider_eh.publishing.in_doubt import InDoubt, check_same_content
from airflow_provider_eh.publishing.plan import PartitionPlan, PartitionResult
from airflow_provider_eh.publishing.records import PendingIntent, from_ranges, to_ranges
from airflow_provider_eh.publishing.state import ProducerStateStore
from airflow_provider_eh.stamps import batch_stamp
from airflow_provider_eh.steps import reached

log = logging.getLogger(__name__)


@dataclass
class _Recovery:
    """What an earlier attempt of this batch left: where it was found, the batch indexes that landed."""

    source: str | None = None  # "pending" (in doubt) or "partial"; None: a fresh batch
    landed: set[int] = field(default_factory=set)
    batch_first_seq: int | None = None
    readback: float | None = None  # seconds spent reading the partition back


class PartitionPlanner:
    """
    Plans one claimed partition's batch: settles its ledger, then writes the intent the sender follows.

    :param store: where producer states live.
    :param in_doubt: the steps that settle a batch whose intent was written and whose commit was not.
    :param hub_fencing: the publisher's fencing mode; under ``"required"`` the hub fences before the intent.
    :param lease_only_batch_bytes: the SDK batch bound a lease-only send keeps, carried in the plan.
    :param content_type: a typed batch's content type, carried in the plan.
    :param origin: who publishes, recorded with the intent.
    :param partition_end: ``(partition id, producer or None) -> the partition's last service sequence number``.
    """

    def __init__(self, store: ProducerStateStore, in_doubt: InDoubt, *, hub_fencing: HubFencing,
                 lease_only_batch_bytes: int, content_type: str | None, origin: dict[str, Any] | None,
                 partition_end: Callable[[str, Any], int]):
        self.store = store
        self.in_doubt = in_doubt
        self.hub_fencing = hub_fencing
        self.lease_only_batch_bytes = lease_only_batch_bytes
        self.content_type = content_type
        self.origin = origin
        self.partition_end = partition_end

    def plan(self, key: StateKey, claim: StateClaim, batch_id: str, count: int, fingerprint: str,
             producer: Any) -> PartitionPlan:
        """The plan of ``count`` events of ``fingerprint`` as batch ``batch_id``, its intent written when it sends."""
        state = claim.state
        base: dict[str, Any] = dict(group=key.group, partition_id=key.partition, batch_id=batch_id,
                                    owner_level=state.owner_level, event_count=count, fingerprint=fingerprint,
                                    hub_fencing=self.hub_fencing, lease_only_batch_bytes=self.lease_only_batch_bytes,
                                    content_type=self.content_type)
        pending, readback = self._settle(key, claim, batch_id)
        done = self._committed(key, claim, batch_id, count, fingerprint, readback)
        if done is not None:
            return PartitionPlan(**base, action="done", result=done)
        if pending is None and self.hub_fencing == REQUIRED:  # the hub and the SDK can fence, before the intent
            self.in_doubt.fence(key, state.owner_level)
        recovery = self._recovery(key, claim, pending, batch_id, count, fingerprint)
        if recovery.readback is None:
            recovery.readback = readback
        return self._write_intent(key, claim, base, recovery, producer)

    def _settle(self, key: StateKey, claim: StateClaim, batch_id: str) -> tuple[PendingIntent | None, float | None]:
        """A pending intent completed if its commit landed, fenced, and set aside if it is another batch's:
        ``(the pending intent of this batch if any, seconds of read-back)``."""
        pending = claim.state.pending
        readback: float | None = None
        if pending is not None and self.in_doubt.complete_commit(key, claim, pending):
            pending = None
        if pending is not None:
            self.in_doubt.fence(key, claim.state.owner_level)
        if pending is not None and pending.batch_id != batch_id:
            readback = self.in_doubt.set_aside(key, claim, pending, batch_id)
            pending = None
        return pending, readback

    def _committed(self, key: StateKey, claim: StateClaim, batch_id: str, count: int, fingerprint: str,
                   readback: float | None) -> PartitionResult | None:
        """The recorded result when ``batch_id`` is committed already
        (:class:`~airflow_provider_eh.errors.BatchContentChangedError` when this attempt's content differs)."""
        last = claim.state.ledger.last
        done = last if last is not None and last.batch_id == batch_id else self.store.find_committed(key, batch_id)
        if done is None:
            return None
        check_same_content(key, batch_id, done.fingerprint, fingerprint, count, done.events)
        log.info("group %s partition %s batch %s: already committed (%d events, seq %d..%d); nothing to send",
                 key.group, key.partition, batch_stamp(batch_id), done.events, done.first_seq, done.last_seq)
        return PartitionResult(key.partition, done.events, done.first_seq, done.last_seq,
                               done.service_last_sequence_number, "already_committed", fencing=done.fencing or "",
                               lease_only_batch_bytes=done.lease_only_batch_bytes, readback_seconds=readback,
                               schema=done.schema)

    def _recovery(self, key: StateKey, claim: StateClaim, pending: PendingIntent | None, batch_id: str, count: int,
                  fingerprint: str) -> _Recovery:
        """What an earlier attempt of this batch landed: read back when it is in doubt, recorded when partial."""
        state = claim.state
        recovery = _Recovery()
        if pending is not None:  # our own batch is in doubt
            check_same_content(key, batch_id, pending.fingerprint, fingerprint, count, pending.events)
            found, recovery.readback = self.in_doubt.landed(key, claim, pending)
            recovery.landed = set(from_ranges(pending.landed)) | found
            state.last_published_seq = max(state.last_published_seq, pending.assigned_end)
            recovery.batch_first_seq = pending.first_of_batch
            recovery.source = "pending"
        elif batch_id in state.partial:
            part = state.partial[batch_id]
            check_same_content(key, batch_id, part.fingerprint, fingerprint, count, part.events)
            recovery.landed = set(from_ranges(part.landed))
            recovery.batch_first_seq = part.batch_first_seq
            recovery.source = "partial"
        return recovery

    def _write_intent(self, key: StateKey, claim: StateClaim, base: dict[str, Any], recovery: _Recovery,
                      producer: Any) -> PartitionPlan:
        """One intent: every event (fresh batch), the missing ones, or none (everything landed: commit only)."""
        state, batch_id, count = claim.state, base["batch_id"], base["event_count"]
        missing = [i for i in range(count) if i not in recovery.landed] if recovery.source else None
        if missing is not None:
            log.info(
                "group %s partition %s batch %s: recovery (%s) found %d of %d events landed, %d missing; "
                "resending the missing ones with fresh sequence numbers",
                key.group, key.partition, batch_stamp(batch_id), recovery.source, len(recovery.landed), count,
                len(missing),
            )
        first_seq = state.last_published_seq + 1
        ranges = None if missing is None else to_ranges(missing)
        state.pending = PendingIntent(
            batch_id=batch_id, first_seq=first_seq, indexes=ranges,
            events=count, fingerprint=base["fingerprint"], owner_level=state.owner_level,
            start_sequence_number=self.partition_end(key.partition, producer), landed=to_ranges(recovery.landed),
            batch_first_seq=first_seq if recovery.batch_first_seq is None else recovery.batch_first_seq,
            started_at=datetime.now(UTC).isoformat(), origin=self.origin,
        )
        indexes = None if ranges is None else tuple((start, stop) for start, stop in ranges)
        plan = PartitionPlan(**base, action="send", first_seq=first_seq, indexes=indexes,
                             recovered_from=recovery.source, landed_count=len(recovery.landed),
                             readback_seconds=recovery.readback)
        state.partial.pop(batch_id, None)
        self.store.write(claim, state)
        if missing != []:
            reached("after_intent")
        return plan
