"""A run's collections: the objects older than the run are out of the full passes' way, and back after it."""

from __future__ import annotations

import gc

import pytest

from airflow_provider_eh.ingest.heap import run_heap


def test_older_objects_are_left_out_during_the_block_and_put_back_after():
    older = [{"cycle": None} for _ in range(100)]
    for item in older:
        item["cycle"] = item  # tracked, cyclic: what only a full pass frees
    assert gc.get_freeze_count() == 0
    with run_heap() as frozen:
        assert frozen and gc.get_freeze_count() >= len(older)
        count = gc.get_freeze_count()
        made = [[] for _ in range(10)]
        assert gc.get_freeze_count() == count  # what the block makes is collected as usual
        assert all(gc.is_tracked(m) for m in made)
    assert gc.get_freeze_count() == 0
    del older
    assert gc.collect() >= 100  # the older cycles are collectable again


def test_a_process_that_froze_objects_itself_keeps_them_frozen():
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with run_heap() as frozen:
            assert not frozen and gc.get_freeze_count() == before
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()


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
