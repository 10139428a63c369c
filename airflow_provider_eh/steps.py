"""The engines' step boundaries, announced to whoever observes them; nobody does in production.

Publishing (:data:`PUBLISH_STEPS`, in order): ``after_claim``; ``after_intent``; ``before_send`` with
the number of the SDK batch about to go out (its claim just checked); ``mid_send`` with the count of
the partition's SDK batches acknowledged so far; ``after_send`` (everything sent, nothing
committed); ``after_commit_records`` (the batch's ledger records written, the state not yet);
``during_commit`` (the commit written, the lease not yet released).

Ingestion (:data:`INGEST_STEPS`): ``ingest_<stage>`` for each stage of a batch
(:data:`airflow_provider_eh.ingest.runner.STAGES`), with the batch's number in this process as the count
and ``{"partition", "first", "last"}`` (its partition and sequence numbers) as the detail.

A Delta sink's dead-letter replay (:data:`REPLAY_STEPS`): ``replay_intent`` (the dead-letter table marks the
letters ``replaying``), ``replay_committed`` (their rows committed, the letters not yet marked ``replayed``),
with the replay's version as the count.

Crash tests observe them from outside (:func:`airflow_provider_eh.testing.crash.crash_at` kills the
process at one step: ``"after_intent"``, ``"mid_send:2"``, ``"ingest_committed:3"``), so no test hook
lives in either engine. This module sits below both engines and imports nothing of the package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

PUBLISH_STEPS = ("after_claim", "after_intent", "before_send", "mid_send", "after_send", "after_commit_records",
                 "during_commit")
COUNTED_STEPS = ("before_send", "mid_send")  # ``step:K`` names the K-th SDK batch
INGEST_STEPS = ("ingest_received", "ingest_rows_written", "ingest_committed", "ingest_blob_checkpointed")
REPLAY_STEPS = ("replay_intent", "replay_committed")

StepObserver = Callable[[str, int, Mapping[str, Any]], None]
_NO_DETAIL: Mapping[str, Any] = {}
_observers: list[StepObserver] = []


def observe(observer: StepObserver) -> Callable[[], None]:
    """Call ``observer(step, count, detail)`` at every step in this process; returns the function that stops it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer) if observer in _observers else None


def reached(step: str, count: int = 0, detail: Mapping[str, Any] | None = None) -> None:
    """
    Announce ``step`` (count: for ``mid_send``, how many SDK batches are acknowledged; for ingestion,
    the batch) with what the engine knows there (``detail``, read-only).
    """
    if not _observers:
        return
    for observer in tuple(_observers):
        observer(step, count, _NO_DETAIL if detail is None else detail)
