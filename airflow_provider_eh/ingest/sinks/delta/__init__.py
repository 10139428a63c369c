"""The Delta Lake sink: each batch one Delta commit holding its rows and the partition's checkpoint.

:class:`DeltaIngestStore` for a table on local disk or Azure storage, its :class:`DeltaTarget` and
:class:`DeltaTransaction`; :func:`maintain` compacts and vacuums. ``deltalake`` (the ``deltalake`` extra) is
imported only when a table is opened.
"""

from __future__ import annotations

from airflow_provider_eh.ingest.sinks.delta.dead_letters import (
    DEAD,
    REPLAYED,
    REPLAYING,
    dead_letter_row,
    dead_letter_schema,
    dead_letter_uri,
)
from airflow_provider_eh.ingest.sinks.delta.maintenance import maintain
from airflow_provider_eh.ingest.sinks.delta.store import DeltaIngestStore, DeltaTransaction, open_table
from airflow_provider_eh.ingest.sinks.delta.target import (
    APPEND,
    DELTA_BATCH_BYTES,
    MERGE,
    DataError,
    DeltaTarget,
    check_delta_options,
)

__all__ = [
    "APPEND",
    "DEAD",
    "DELTA_BATCH_BYTES",
    "MERGE",
    "REPLAYED",
    "REPLAYING",
    "DataError",
    "DeltaIngestStore",
    "DeltaTarget",
    "DeltaTransaction",
    "check_delta_options",
    "dead_letter_row",
    "dead_letter_schema",
    "dead_letter_uri",
    "maintain",
    "open_table",
]
