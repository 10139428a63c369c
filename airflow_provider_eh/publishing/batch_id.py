"""The derived batch id of one unit of work.

Batch ids are derived, never random: a retry, a clear-and-rerun and a backfill of the same interval
derive the same id, which is what lets the ledger turn them into no-ops. ``generation`` is the one
knob that deliberately makes a new id.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime


def _iso(value: datetime | str | None) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def derive_batch_id(
    group: str,
    dag_id: str,
    task_id: str,
    *,
    interval_start: datetime | str | None = None,
    interval_end: datetime | str | None = None,
    logical_date: datetime | str | None = None,
    run_id: str | None = None,
    map_index: int = -1,
    generation: int = 0,
) -> str:
    """
    The 64-hex batch id of one unit of work.

    :param group: the producer group.
    :param dag_id: the DAG.
    :param task_id: the task.
    :param interval_start: start of the data interval (preferred over ``logical_date``).
    :param interval_end: end of the data interval.
    :param logical_date: used when the run has no data interval.
    :param run_id: used when the run has neither (Airflow 3 manual runs without a logical date): a
        retry and a clear-and-rerun keep their run id, so they still derive the same batch id.
    :param map_index: the mapped task's index, ``-1`` when not mapped.
    :param generation: bump to republish the same interval on purpose.
    """
    if interval_start is not None or interval_end is not None:
        when = ["interval", _iso(interval_start), _iso(interval_end)]
    elif logical_date is not None:
        when = ["logical_date", _iso(logical_date)]
    elif run_id is not None:
        when = ["run_id", run_id]
    else:
        raise ValueError(
            f"batch of {dag_id}.{task_id}: needs a data interval, a logical date or a run id to derive a stable id"
        )
    material = json.dumps(["eh-batch-v1", group, dag_id, task_id, when, int(map_index), int(generation)])
    return hashlib.sha256(material.encode()).hexdigest()
