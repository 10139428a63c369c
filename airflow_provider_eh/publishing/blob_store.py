"""Producer state in Azure Blob Storage: one JSON blob per (namespace, hub, group, partition), plus a small
blob per ledger record.

The state document ``"{namespace}/{hub}/{group}/producer-state/{partition}"`` (lower-cased) is held under a
blob lease for the whole claim; a background thread renews it. Every write carries the lease and
an ETag ``if_match``: a write that finds another ETag or no lease fails with
ProducerDisconnectedError, and a renewal that fails marks the claim lost, which stops the sender
before its next SDK batch. A renewal that does not answer cannot keep a paused or cut-off holder
sending either: every call under the lease is bounded to a third of it, and the claim's deadline
(the start of the last successful acquire or renewal, plus the lease, less :func:`safety_margin`)
stops the sender before its next SDK batch once it has passed. A crashed holder's lease expires after
``lease_seconds``; a new claim waits for that up to ``claim_timeout`` seconds, then gives up with ProducerDisconnectedError
(retryable: Airflow's retry back-off is the wait). By default it waits a little longer than one
lease (:data:`CLAIM_GRACE_SECONDS` more), so a task cleared right after its SIGKILLed run publishes
instead of failing, while a live holder, which keeps renewing, still fences it off.

Ledger records (:mod:`~airflow_provider_eh.publishing.state`) are blobs of their own,
``"_ledger/{namespace}/{hub}/{group}/{partition}/{batch|history}/{name}"``, written under the
document's claim; only the document carries the lease, so listing the documents of a hub (as the view
does) never walks the records.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError

from airflow_provider_eh.errors import ProducerDisconnectedError, ProducerStateStoreError
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.state import OperationTimer, ProducerStateStore, timed

if TYPE_CHECKING:
    from azure.storage.blob import ContainerClient

log = logging.getLogger(__name__)

#: how much longer than one lease a claim waits by default: a crashed holder's lease has expired by then
CLAIM_GRACE_SECONDS = 5.0


def safety_margin(lease_seconds: float) -> float:
    """How long before its lease can expire a holder stops: a fifth of the lease, at least 2 s."""
    return max(2.0, lease_seconds / 5)


def call_timeouts(lease_seconds: float) -> dict[str, Any]:
    """Time bounds of one blob call made under a lease (renew, write, release): a third of the lease.

    A renewal that hangs (storage unreachable, a frozen connection) then fails well before the lease
    can expire, and the claim is marked lost instead of waiting in silence.
    """
    bound = lease_seconds / 3
    return {"timeout": max(1, int(bound)), "connection_timeout": bound, "read_timeout": bound}


class BlobStateClaim(StateClaim):
    """A claim of the blob backend: the blob's lease (``lease``, an azure-storage-blob ``BlobLeaseClient``)
    and the thread renewing it until ``stop_renewal`` is set."""

    def __init__(self, key: StateKey, state: ProducerState, tag: Any, where: str, lease: Any):
        super().__init__(key, state, tag, where)
        self.lease = lease
        self.stop_renewal = threading.Event()
        self.renewal: threading.Thread | None = None


def default_claim_timeout(lease_seconds: float) -> float:
    """The claim wait used when none is given: one lease plus :data:`CLAIM_GRACE_SECONDS`."""
    return float(lease_seconds) + CLAIM_GRACE_SECONDS


class BlobProducerStateStore(ProducerStateStore[BlobStateClaim]):
    """
    Leased, compare-and-swap producer state in one blob container.

    :param container: an azure-storage-blob ``ContainerClient`` (from ``BlobStorageHook``).
    :param lease_seconds: blob lease duration, 15 to 60; a crashed publisher blocks the partition this long.
    :param claim_timeout: seconds to wait for another holder's lease to expire before giving up;
        ``None`` (default): :func:`default_claim_timeout`, long enough for a crashed holder's lease to expire.
    :param on_operation: told the duration of each operation
        (:data:`~airflow_provider_eh.publishing.state.OperationTimer`); ``None``: nothing is timed.
    """

    backend = "blob"

    def __init__(self, container: ContainerClient, *, lease_seconds: int = 15, claim_timeout: float | None = None,
                 on_operation: OperationTimer | None = None):
        if not 15 <= lease_seconds <= 60:
            raise ValueError(f"lease_seconds={lease_seconds!r}: must be between 15 and 60 (Azure Blob lease limits)")
        self.container = container
        self.lease_seconds = lease_seconds
        self.claim_timeout = default_claim_timeout(lease_seconds) if claim_timeout is None else float(claim_timeout)
        self.on_operation = on_operation

    def describe(self, key: StateKey) -> str:
        return f"blob {self.container.container_name}/{key.blob_name}"

    def reset_hint(self, key: StateKey) -> str:
        return f"delete blob {key.blob_name!r} in container {self.container.container_name!r}"

    @timed("read")
    def read(self, key: StateKey) -> ProducerState | None:
        try:
            text = self.container.get_blob_client(key.blob_name).download_blob().readall()
        except ResourceNotFoundError:
            return None
        return self.decode(key, text)

    def _acquire(self, key: StateKey) -> BlobStateClaim:
        blob = self.container.get_blob_client(key.blob_name)
        try:
            blob.upload_blob(ProducerState.new(key).to_json(), overwrite=False)
        except ResourceExistsError:
            pass
        except ResourceNotFoundError as exc:
            if getattr(exc, "error_code", None) != "ContainerNotFound":
                raise
            raise ProducerStateStoreError(
                f"{key}: the state container {self.container.container_name!r} does not exist in storage account "
                f"{self.container.account_name!r}. Nothing was sent. Create the container (the operators create it "
                "when the wasb connection may), or point state_container at the one holding this group's states."
            ) from None
        deadline = time.monotonic() + self.claim_timeout
        while True:
            started = time.monotonic()
            try:
                lease = blob.acquire_lease(lease_duration=self.lease_seconds, **call_timeouts(self.lease_seconds))
                break
            except HttpResponseError as exc:
                if getattr(exc, "status_code", None) != 409:
                    raise
                if time.monotonic() >= deadline:
                    if self.claim_timeout > self.lease_seconds:  # a crashed holder's lease would have expired
                        why = (f"it is alive: its lease of {self.lease_seconds}s was renewed throughout the "
                               f"{self.claim_timeout:g}s this claim waited. Two runs of one producer group must not "
                               "overlap: let the other run finish (or stop it), then retry")
                    else:
                        why = (f"or it crashed less than {self.lease_seconds}s ago: claim_timeout={self.claim_timeout:g}s "
                               "is shorter than the lease. Retry after back-off, or leave claim_timeout at its default")
                    raise ProducerDisconnectedError(
                        f"{key}: another publisher holds the lease on {self.describe(key)} and owns the partition; "
                        f"{why}."
                    ) from None
                time.sleep(1.0)
        try:
            downloader = blob.download_blob(lease=lease)
            text = downloader.readall()
            state = self.decode(key, text)
        except BaseException:
            lease.release()
            raise
        claim = BlobStateClaim(key, state, downloader.properties.etag, self.describe(key), lease)
        claim.hold(started, self.lease_seconds, safety_margin(self.lease_seconds))
        claim.renewal = threading.Thread(target=self._renew, args=(claim, claim.stop_renewal),
                                         name=f"eh-lease-{key.partition}", daemon=True)
        claim.renewal.start()
        return claim

    def _renew(self, claim: BlobStateClaim, stop: threading.Event) -> None:
        while not stop.wait(self.lease_seconds / 3):
            if claim.lapse_if_due():  # woken after a pause: the lease may be another's already
                log.warning("%s: the lease on %s was not renewed in time: %s", claim.key, claim.where, claim.lost_reason)
                return
            started = time.monotonic()
            try:
                claim.lease.renew(**call_timeouts(self.lease_seconds))
                claim.hold(started, self.lease_seconds, safety_margin(self.lease_seconds))
            except Exception as exc:  # any failure means we can no longer prove ownership
                log.warning("%s: renewing the lease on %s failed: %s", claim.key, claim.where, exc)
                claim.mark_lost(f"lease renewal failed: {type(exc).__name__}")
                return

    @timed("write")
    def write(self, claim: BlobStateClaim, state: ProducerState) -> None:
        claim.check()
        blob = self.container.get_blob_client(claim.key.blob_name)
        try:
            result: dict[str, Any] = blob.upload_blob(
                state.to_json(), overwrite=True, lease=claim.lease, etag=claim.tag,
                match_condition=MatchConditions.IfNotModified, **call_timeouts(self.lease_seconds),
            )
        except HttpResponseError as exc:
            if getattr(exc, "status_code", None) in (409, 412):
                claim.mark_lost(f"compare-and-swap failed ({exc.status_code})")
                claim.check()
            raise
        claim.tag = result["etag"]
        claim.state = state

    def get_record(self, key: StateKey, kind: str, name: str) -> str | None:
        try:
            data: bytes = self.container.get_blob_client(key.record_blob_name(kind, name)).download_blob().readall()
        except ResourceNotFoundError:
            return None
        return data.decode()

    def put_record(self, claim: BlobStateClaim, kind: str, name: str, text: str) -> None:
        self.container.get_blob_client(claim.key.record_blob_name(kind, name)).upload_blob(
            text, overwrite=True, **call_timeouts(self.lease_seconds))

    def delete_record(self, claim: BlobStateClaim, kind: str, name: str) -> None:
        try:
            self.container.get_blob_client(claim.key.record_blob_name(kind, name)).delete_blob(
                **call_timeouts(self.lease_seconds))
        except ResourceNotFoundError:
            pass

    def describe_record(self, key: StateKey, kind: str, name: str) -> str:
        return f"blob {self.container.container_name}/{key.record_blob_name(kind, name)}"

    @timed("release")
    def release(self, claim: BlobStateClaim) -> None:
        claim.stop_renewal.set()
        try:
            claim.lease.release(**call_timeouts(self.lease_seconds))
        except Exception as exc:  # an expired or broken lease needs no release
            log.debug("%s: releasing the lease on %s: %s", claim.key, claim.where, exc)
