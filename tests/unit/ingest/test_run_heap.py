"""A run's collections: the objects older than the run are out of the full passes' way, and back after it."""

from __future__ import annotations

import gc
import weakref

import pytest

from airflow_provider_eh.ingest.garbage_collection import run_heap


class _Node:
    """A tracked object in a cycle with itself: what only a collection frees."""

    def __init__(self) -> None:
        self.me = self


def test_older_objects_are_left_out_during_the_block_and_put_back_after():
    older = [_Node() for _ in range(100)]
    refs = [weakref.ref(node) for node in older]
    assert gc.get_freeze_count() == 0
    with run_heap() as frozen:
        assert frozen and gc.get_freeze_count() >= len(older)
        made = weakref.ref(_Node())
        gc.collect()
        assert made() is None  # what the block makes is collected as usual
        del older
        gc.collect()
        assert all(ref() is not None for ref in refs)  # frozen: not even a full collection frees them
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert all(ref() is None for ref in refs)  # back in the collector's reach


def test_a_process_that_froze_objects_itself_keeps_them_frozen():
    # the frozen count itself moves: a frozen object freed by its reference count leaves it
    node = _Node()
    kept = weakref.ref(node)  # a cycle the process froze: only an unfreeze makes it collectable
    gc.freeze()
    del node
    try:
        with run_heap() as frozen:
            assert not frozen and gc.get_freeze_count() > 0
        gc.collect()
        assert kept() is not None and gc.get_freeze_count() > 0  # the block did not unfreeze it
    finally:
        gc.unfreeze()
    gc.collect()
    assert kept() is None


def test_a_process_without_the_collector_is_left_so():
    gc.disable()
    try:
        with run_heap() as frozen:
            assert not frozen and gc.get_freeze_count() == 0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_in_the_block_still_puts_the_objects_back():
    with pytest.raises(RuntimeError), run_heap():
        raise RuntimeError("a run that failed")
    assert gc.get_freeze_count() == 0
