"""The exclusive hold on one producer state that a store's claim gives, with the deadline it is surely held until.

Both backends' claims are this class, the blob backend's with its lease and renewal besides
(:class:`~airflow_provider_eh.publishing.blob_store.BlobStateClaim`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from airflow_provider_eh.errors import ProducerDisconnectedError
from airflow_provider_eh.publishing.document import ProducerState, StateKey


class StateClaim:
    """
    An exclusive hold on one state: the state as last written, its version tag, a lost flag, and a deadline.

    The deadline (``held_until``, on this process's monotonic clock) is until when the hold is surely
    ours: the start of the last successful acquire or renewal, plus the hold's length, less a safety
    margin. A publisher that was paused (a frozen VM, a long GC, SIGSTOP) or cut off from its store
    past it may have been taken over without knowing: :meth:`check`, called before every SDK batch,
    stops it. What a backend needs besides (the blob backend's lease and its renewal) is in the
    backend's own subclass (:class:`~airflow_provider_eh.publishing.blob_store.BlobStateClaim`).
    """

    def __init__(self, key: StateKey, state: ProducerState, tag: Any, where: str):
        self.key = key
        self.state = state
        self.tag = tag
        self.where = where
        self.lost = threading.Event()
        self.lost_reason = ""
        self.held_until: float | None = None

    def hold(self, started: float, seconds: float, margin: float) -> None:
        """The hold was confirmed by a call started at ``started`` (monotonic) and lasts ``seconds``."""
        until = started + seconds - margin
        if self.held_until is None or until > self.held_until:
            self.held_until = until

    def lapse_if_due(self) -> bool:
        """Mark the claim lost if its deadline has passed; whether it is lost.

        Called by the sender before every SDK batch and by a backend before renewing: after a pause,
        whichever runs first records the same reason, the deadline.
        """
        if not self.lost.is_set() and self.held_until is not None and time.monotonic() >= self.held_until:
            late = time.monotonic() - self.held_until
            self.mark_lost(f"its hold was last confirmed too long ago: the deadline passed {late:.1f}s ago, a "
                           "pause or a store that did not answer; another publisher may have taken over")
        return self.lost.is_set()

    def check(self) -> None:
        """Raise ProducerDisconnectedError when the claim was lost or its deadline has passed."""
        if self.lapse_if_due():
            raise ProducerDisconnectedError(
                f"{self.key}: lost ownership of {self.where} ({self.lost_reason}); another publisher may own the "
                "partition now. Stopped before sending more; a retry after back-off recovers safely."
            )

    def mark_lost(self, reason: str) -> None:
        if not self.lost.is_set():
            self.lost_reason = reason
        self.lost.set()
