"""A claimed partition with its plan: what :meth:`IdempotentPublisher.begin` hands out and ``commit`` takes back."""

from __future__ import annotations

from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import StateKey
from airflow_provider_eh.publishing.plan import PartitionPlan


class PartitionSession:
    """A claimed partition with its plan; hand ``plan`` to the sender and the session back to ``commit``."""

    def __init__(self, key: StateKey, claim: StateClaim, plan: PartitionPlan):
        self.key = key
        self.claim = claim
        self.plan = plan

    def check(self) -> None:
        """Raise ProducerDisconnectedError if the claim was lost; the sender's ``stop_check``."""
        self.claim.check()

    @property
    def intent_start(self) -> int | None:
        """The partition's last service sequence number when the intent was written (``None``: no intent)."""
        pending = self.claim.state.pending
        return None if pending is None else int(pending.start_sequence_number)
