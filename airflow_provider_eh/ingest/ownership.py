"""Which instance processes which partition: claims on the standard ownership blobs.

The blobs are those every Azure SDK's processor uses (``<ns>/<hub>/<group>/ownership/<partition>``,
metadata ``ownerid``); they are read with the package's checkpoint reader and claimed with the SDK's
``BlobCheckpointStore.claim_ownership`` with ``if_match`` on the ETag read, so a claim that races
another one fails with HTTP 412 and is dropped. A partition that has no ownership blob yet first gets a
released one (created with ``if_none_match="*"``; losing that race is harmless), and is then claimed on
its ETag like any other: the SDK's own first claim sets metadata with ``if_none_match="*"``, which
Azurite does not enforce on an existing blob, so two instances could both win it there. A claim not
renewed within ``expiry`` counts as abandoned and may be taken over; owners renew after every batch.

:func:`plan_claims` is the load-balancing decision, pure so that it can be tested alone:

- the fair share is ``ceil(partitions / owners)``, where owners are the instances holding an unexpired
  claim plus this one, and at least ``instances`` when the number of mapped instances is known;
- ``greedy`` claims up to the fair share in one cycle, ``balanced`` one partition per cycle;
- unowned or expired partitions that still have work are taken first; when there are none and this
  instance has less than its share, ``balanced`` and ``greedy`` steal from an owner holding more than
  its share (only when ``instances`` is not given: mapped instances split without stealing);
- an instance whose own partitions are all done takes over expired claims regardless of share, and
  partitions nobody claimed once it has been idle for ``expiry``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.checkpoints.blob_layout import OWNERSHIP, CheckpointReader, Ownership, partition_blob

log = logging.getLogger(__name__)

GREEDY = "greedy"
BALANCED = "balanced"


@dataclass(frozen=True)
class Claim:
    """
    An ownership as seen in one listing.

    :param partition_id: the partition.
    :param owner_id: its owner, empty when released.
    :param age: seconds since it was last claimed or renewed.
    :param etag: the blob's ETag (``None``: no blob yet).
    """

    partition_id: str
    owner_id: str
    age: float
    etag: str | None


def is_live(claim: Claim | None, expiry: float) -> bool:
    """Whether ``claim`` holds its partition: it has an owner and was renewed less than ``expiry`` seconds ago."""
    return claim is not None and bool(claim.owner_id) and claim.age < expiry


def plan_claims(
    *,
    owner_id: str,
    partition_ids: Iterable[str],
    claims: Mapping[str, Claim],
    pending: Iterable[str],
    expiry: float,
    strategy: str = BALANCED,
    instances: int | None = None,
    idle_for: float = 0.0,
) -> list[str]:
    """
    The partitions this owner should try to claim now (never ones it holds live already).

    :param owner_id: this instance.
    :param partition_ids: every partition of the run.
    :param claims: the ownership listing.
    :param pending: partitions that still have work in this run.
    :param expiry: seconds after which a claim is abandoned.
    :param strategy: ``balanced`` or ``greedy``.
    :param instances: how many instances share the partitions, when known.
    :param idle_for: seconds this instance has had nothing of its own to do.
    """
    partition_ids = list(partition_ids)
    pending_set = set(pending)
    live = {p: c for p, c in claims.items() if is_live(c, expiry)}
    mine = {p for p, c in live.items() if c.owner_id == owner_id}
    owners = {c.owner_id for c in live.values()} | {owner_id}
    share = math.ceil(len(partition_ids) / max(len(owners), instances or 1))
    free = [p for p in partition_ids if p in pending_set and p not in live]
    room = share - len(mine)
    limit = 1 if strategy == BALANCED else max(room, 1)
    if room > 0 and free:
        return free[: min(room, limit)]
    if not mine & pending_set:
        # Nothing of ours is left: take over claims that expired (their owner is gone), and after a
        # whole expiry period idle, partitions nobody ever claimed (an instance that never started).
        abandoned = [p for p in free if p in claims and claims[p].owner_id]
        if abandoned:
            return abandoned[:1] if strategy == BALANCED else abandoned
        if free and idle_for >= expiry:
            return free[:1] if strategy == BALANCED else free
    if room > 0 and instances is None:
        return _steal(live, owner_id, share, pending_set)[:1]
    return []


def _steal(live: Mapping[str, Claim], owner_id: str, share: int, pending: set[str]) -> list[str]:
    counts: dict[str, int] = {}
    for claim in live.values():
        counts[claim.owner_id] = counts.get(claim.owner_id, 0) + 1
    victims = sorted(
        (p for p, c in live.items() if c.owner_id != owner_id and counts[c.owner_id] > share and p in pending),
        key=lambda p: (-counts[live[p].owner_id], p),
    )
    return victims


class PartitionOwnership:
    """
    Claims, renewals and release of this instance's partitions.

    :param checkpoint_store: the SDK's ``BlobCheckpointStore`` over the container.
    :param reader: the package's checkpoint reader over the same container.
    :param fully_qualified_namespace: the namespace, as the consumers' clients name it.
    :param eventhub_name: the hub.
    :param consumer_group: the consumer group.
    :param owner_id: this instance's stable id (same on a retry of the same task instance).
    :param expiry: seconds after which an unrenewed claim is abandoned.
    """

    def __init__(
        self,
        checkpoint_store: Any,
        reader: CheckpointReader,
        *,
        fully_qualified_namespace: str,
        eventhub_name: str,
        consumer_group: str,
        owner_id: str,
        expiry: float,
    ):
        self.store = checkpoint_store
        self.reader = reader
        self.namespace = fully_qualified_namespace
        self.eventhub_name = eventhub_name
        self.consumer_group = consumer_group
        self.owner_id = owner_id
        self.expiry = expiry
        self.owned: dict[str, str] = {}  # partition -> etag of our last claim
        self.renewed_at = 0.0

    def list(self) -> dict[str, Claim]:
        """Every partition's ownership as one listing shows it."""
        now = time.time()
        listing = self.reader.read(self.consumer_group).ownership
        return {p: claim_from_ownership(o, now) for p, o in listing.items()}

    def _write_ownership(self, partition_ids: Iterable[str], owner_id: str, etags: Mapping[str, str | None]) -> set[str]:
        """Set ``owner_id`` (empty: release) on the partitions' ownership blobs, each if its ETag still matches;
        return those written."""
        requests = [
            {
                "fully_qualified_namespace": self.namespace,
                "eventhub_name": self.eventhub_name,
                "consumer_group": self.consumer_group,
                "partition_id": p,
                "owner_id": owner_id,
                "etag": etags.get(p),
            }
            for p in partition_ids
        ]
        if not requests:
            return set()
        claimed = self.store.claim_ownership(requests)
        got = {str(c["partition_id"]): c["etag"] for c in claimed}
        if owner_id:
            self.owned.update(got)
        return set(got)

    def _first_etag(self, partition_id: str) -> str | None:
        """
        Create the partition's ownership blob released (unless it exists) and return its ETag, or
        ``None`` when another instance already holds it.
        """
        from azure.core.exceptions import ResourceExistsError, ResourceModifiedError

        blob = self.reader.container_client.get_blob_client(
            partition_blob(self.namespace, self.eventhub_name, self.consumer_group, OWNERSHIP, partition_id)
        )
        try:
            return blob.upload_blob(b"", metadata={"ownerid": ""}, if_none_match="*")["etag"]
        except (ResourceExistsError, ResourceModifiedError):
            properties = blob.get_blob_properties()  # created meanwhile: claimable only if still released
            return None if properties.metadata.get("ownerid") else properties.etag

    def claim(self, partition_ids: Iterable[str], claims: Mapping[str, Claim]) -> set[str]:
        """Try to claim ``partition_ids`` against the ETags of the listing ``claims``; return those won."""
        etags = {p: (claims[p].etag if p in claims else None) or self._first_etag(p) for p in partition_ids}
        wanted = [p for p, etag in etags.items() if etag is not None]
        won = self._write_ownership(wanted, self.owner_id, etags)
        for p in etags:
            if p in won:
                log.info("Instance %s claimed partition %s of %s/%s", self.owner_id, p, self.eventhub_name, self.consumer_group)
            else:
                log.info("Instance %s lost the race for partition %s of %s/%s", self.owner_id, p, self.eventhub_name,
                         self.consumer_group)
        self.renewed_at = time.monotonic()
        return won

    def adopt(self, claims: Mapping[str, Claim]) -> None:
        """Take back live claims of our own owner id (a retry of this task instance)."""
        for p, c in claims.items():
            if c.owner_id == self.owner_id and is_live(c, self.expiry) and p not in self.owned:
                self.owned[p] = c.etag or ""

    def renew(self, force: bool = False) -> set[str]:
        """Renew every owned partition (when a third of ``expiry`` has passed); return those lost."""
        if not self.owned or (not force and time.monotonic() - self.renewed_at < self.expiry / 3):
            return set()
        before = dict(self.owned)
        self.owned.clear()
        kept = self._write_ownership(before, self.owner_id, before)
        self.renewed_at = time.monotonic()
        lost = set(before) - kept
        for p in sorted(lost):
            log.warning("Instance %s lost partition %s of %s/%s to another instance", self.owner_id, p, self.eventhub_name,
                        self.consumer_group)
        return lost

    def release(self, partition_ids: Iterable[str] | None = None) -> None:
        """Give owned partitions up (owner id emptied), so others need not wait for expiry.

        :param partition_ids: the partitions to give up; ``None``: every owned one. One another
            instance holds meanwhile stays as it is (the write is conditional on our claim's ETag).
        """
        wanted = set(self.owned) if partition_ids is None else {str(p) for p in partition_ids}
        owned = {p: self.owned.pop(p) for p in sorted(wanted & set(self.owned))}
        if owned:
            self._write_ownership(owned, "", owned)
            log.info("Instance %s released partitions %s", self.owner_id, ", ".join(sorted(owned)))


def claim_from_ownership(ownership: Ownership, now: float) -> Claim:
    """The :class:`Claim` a listed ownership blob makes, aged as of ``now`` (epoch seconds)."""
    modified = ownership.last_modified.timestamp() if ownership.last_modified else 0.0
    return Claim(ownership.partition_id, ownership.owner_id, max(0.0, now - modified), ownership.etag)
