"""A run's garbage collection: full passes over what the run made, not over the whole process.

CPython's collector makes a full pass (every tracked object of the process) whenever the objects that
survived its younger passes reach a quarter of the older ones. A run's events outlive the young passes
(they wait in the receive queue and the batch being gathered), so a long run makes full passes, each over
everything the process had loaded before it: Airflow's modules and objects in a task, pandas and PyArrow
beside a Delta sink. Those passes are a share of a run's CPU worth removing (the figures, from
``bench/ingest.py``'s process: ``bench/README.md``, "Design figures").

:func:`run_heap` moves what existed before the run out of the collector's reach for the run's length
(:func:`gc.freeze`: the same step Airflow's executors take before they fork), so full passes traverse
only what the run made, and puts it back at the end (:func:`gc.unfreeze`): garbage among the older
objects is collected again from then on. Nothing is changed where the process froze objects of its own
(a pre-forking server that keeps them frozen) or turned the collector off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def run_heap() -> Iterator[bool]:
    """For the ``with`` block, full collections leave out the objects that existed before it; whether it did."""
    if not gc.isenabled() or gc.get_freeze_count():
        yield False
        return
    gc.freeze()
    try:
        yield True
    finally:
        gc.unfreeze()
