"""The protocol's step boundaries, announced to whoever observes them; nobody does in production.

Steps, in order: ``after_claim``; ``after_intent``; ``mid_send`` with the count of the partition's
SDK batches acknowledged so far; ``after_send`` (everything sent, nothing committed);
``during_commit`` (the commit written, the lease not yet released). Crash tests observe them from
outside (:mod:`airflow_provider_eh.testing.crash` kills the process at one step), so no test hook
lives in the engine.
"""

from __future__ import annotations

from typing import Callable

STEPS = ("after_claim", "after_intent", "mid_send", "after_send", "during_commit")

StepObserver = Callable[[str, int], None]
_observers: list[StepObserver] = []


def observe(observer: StepObserver) -> Callable[[], None]:
    """Call ``observer(step, count)`` at every step in this process; returns the function that stops it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer) if observer in _observers else None


def reached(step: str, count: int = 0) -> None:
    """Announce ``step`` (and, for ``mid_send``, how many SDK batches are acknowledged)."""
    for observer in tuple(_observers):
        observer(step, count)
