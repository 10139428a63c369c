"""The picklable values that cross the driver/executor boundary: options, plans and results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_eh.client.fencing import HubFencing
from airflow_provider_eh.publishing.in_flight import DEFAULT_LEASE_ONLY_BATCH_BYTES
from airflow_provider_eh.publishing.records import ranges_len
from airflow_provider_eh.stamps import batch_stamp


@dataclass(frozen=True)
class PartitionOptions:
    """
    Advanced per-partition publishing options (the seed design's PartitionPublishingOptions).

    :param producer_group: this partition's state lives under this group instead of the publisher's.
    :param owner_level: claim with this owner level instead of stored + 1.
    :param starting_sequence_number: first producer sequence number of a partition that never published.
    """

    producer_group: str | None = None
    owner_level: int | None = None
    starting_sequence_number: int | None = None


def producer_group_of(options: Mapping[str, PartitionOptions], partition_id: str, default: str) -> str:
    """The producer group of a partition's state: its options' ``producer_group``, else ``default`` (the publisher's)."""
    own = options.get(str(partition_id))
    return (own.producer_group if own is not None else None) or default


@dataclass(frozen=True)
class PartitionResult:
    """The outcome of one partition; ``sequence_range()`` is the part a task returns per partition."""

    partition_id: str
    events: int
    first_seq: int
    last_seq: int
    service_last_sequence_number: int
    status: str  # "published" | "already_committed" | "recovered"
    landed_count: int = 0  # recovery: events of the batch found already landed
    resent: int = 0
    fencing: str = ""  # how the batch's (last) send was fenced: "hub" (idempotent-producer link) or "lease"; "" none
    lease_only_batch_bytes: int | None = None  # under "lease": the bytes of one SDK batch at most; None otherwise
    # seconds the claim spent reading the partition back to settle a batch in doubt; None: nothing was in doubt
    readback_seconds: float | None = field(default=None, compare=False)
    schema: dict[str, Any] | None = None  # a typed batch's schema {group, name, id, version, format}; None: untyped

    def sequence_range(self) -> dict[str, int]:
        return {
            "events": self.events,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "service_last_sequence_number": self.service_last_sequence_number,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PartitionPlan:
    """
    What one partition must do for one batch, decided by the driver under its claim.

    ``action`` is ``"done"`` (nothing to send; ``result`` holds the outcome) or ``"send"``: send the
    events whose indexes are in ``indexes`` (``[start, stop)`` ranges; ``None`` means all
    ``event_count``), in index order, stamped with producer sequence numbers ``first_seq``,
    ``first_seq + 1``, ... ``landed_count`` is how many events recovery found already landed (0 on a
    fresh batch; the ledger's ``landed`` is the index ranges themselves). ``hub_fencing``: the publisher's
    (``"auto"``: the sender attaches as an idempotent producer where the hub and the SDK offer it;
    ``"required"``: it must; ``False``: an ordinary sender). ``lease_only_batch_bytes``: the publisher's
    bound on each SDK batch where the send turns out fenced by the lease alone
    (:mod:`~airflow_provider_eh.publishing.in_flight`). ``readback_seconds``: how long the claim read the
    partition back to settle a batch in doubt (``None``: nothing was in doubt), for the result to report.
    ``content_type``: a typed batch's (``avro/binary+<schema id>``), set on every event sent and covered by
    the fingerprint; ``None``: untyped.
    """

    group: str
    partition_id: str
    batch_id: str
    owner_level: int
    event_count: int
    fingerprint: str
    action: str
    first_seq: int = 0
    indexes: tuple[tuple[int, int], ...] | None = None
    recovered_from: str | None = None  # None | "pending" | "partial"
    landed_count: int = 0
    result: PartitionResult | None = None
    hub_fencing: HubFencing = "auto"
    lease_only_batch_bytes: int = DEFAULT_LEASE_ONLY_BATCH_BYTES
    readback_seconds: float | None = None  # the claim's read-back of a batch in doubt, as the result reports it
    content_type: str | None = None  # a typed batch's content type (the schema id in it), on every event sent

    @property
    def batch_stamp(self) -> str:
        return batch_stamp(self.batch_id)

    @property
    def send_count(self) -> int:
        if self.action != "send":
            return 0
        return self.event_count if self.indexes is None else ranges_len(self.indexes)
