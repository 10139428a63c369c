"""What a stalled publisher can still land when only the claim's lease fences it: one SDK batch per partition.

A partition sends one SDK batch at a time and checks its claim's deadline before each
(:class:`~airflow_provider_eh.publishing.sender.BatchSender`). A publisher paused after that check
and before its batch went out can land that batch once it resumes, after another run took the
partition over and resent the same events; the hub's fencing refuses it, the lease cannot. So where
the send is fenced by the lease alone, the size of an SDK batch is the exposure, and
``lease_only_batch_bytes`` bounds it: every SDK batch of such a send holds at most that many bytes
(the SDK's measure: the encoded messages and their batch overhead). An event larger than the bound
goes out alone, in an SDK batch of the link's size. Under the hub's fencing the bound does not apply:
the hub refuses whatever a stalled publisher had in flight, and batches fill to the link's limit.

The default is chosen by ``bench/lease_only_bound.py`` (duplicates at the hub after a stall, and
the publish rate against the plain SDK); ``docs/exactly-once.md`` has the figures.
"""

from __future__ import annotations

#: Event Hubs' limit of one message (and so of one SDK batch): 1 MiB on every tier that allows the most
MAX_LEASE_ONLY_BATCH_BYTES = 1024 * 1024
#: the smallest bound taken: below it every event would go out alone, at a round trip each
MIN_LEASE_ONLY_BATCH_BYTES = 1024
#: the bound where no other is given (chosen by measurement, see the module's docstring)
DEFAULT_LEASE_ONLY_BATCH_BYTES = 256 * 1024


def check_lease_only_batch_bytes(value: object, name: str = "lease_only_batch_bytes") -> int:
    """``value`` checked as the lease-only bound: a whole number of bytes from 1 KiB to 1 MiB.

    :raises ValueError: naming the argument, its value, the range and what the bound means.
    """
    if (not isinstance(value, int) or isinstance(value, bool)
            or not MIN_LEASE_ONLY_BATCH_BYTES <= value <= MAX_LEASE_ONLY_BATCH_BYTES):
        raise ValueError(
            f"{name}={value!r}: must be a whole number of bytes between {MIN_LEASE_ONLY_BATCH_BYTES} and "
            f"{MAX_LEASE_ONLY_BATCH_BYTES} (Event Hubs' 1 MiB batch limit). It bounds each SDK batch, and so "
            "what a stalled publisher can land twice per partition, where the send is fenced by the claim's lease "
            f"alone; default {DEFAULT_LEASE_ONLY_BATCH_BYTES}. An event larger than the bound is sent alone."
        )
    return value


def batch_cap(bound: int, link_max: int, fenced_at_hub: bool) -> int | None:
    """The most bytes of one SDK batch of a send, where it is below the link's own limit; ``None``: the link's.

    :param bound: the publisher's ``lease_only_batch_bytes``.
    :param link_max: the sender link's maximum message size (the SDK batch's default size).
    :param fenced_at_hub: the send goes on an idempotent-producer link (the bound does not apply).
    """
    if fenced_at_hub or bound >= link_max:
        return None
    return bound


def bound_in_force(bound: int, link_max: int, fenced_at_hub: bool) -> int | None:
    """The bytes a stalled send can have in flight per partition under the lease alone: the bound, or the
    link's limit where that is smaller; ``None`` under the hub's fencing (what the results and the ledger record)."""
    if fenced_at_hub:
        return None
    return min(bound, link_max)
