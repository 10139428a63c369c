"""Where and how the Delta sink writes: the table, its options, and what it refuses (no Airflow import)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.errors import EventHubsProviderError, SinkConfigError
from airflow_provider_eh.ingest.sinks.contract import sessions_refused
from airflow_provider_eh.ingest.sinks.delta.dead_letters import dead_letter_uri

APPEND = "append"
MERGE = "merge"
# a Delta sink's default batch_bytes: few, large commits and files (a SQL sink's is 4 MiB)
DELTA_BATCH_BYTES = 64 * 1024 * 1024

class DataError(EventHubsProviderError, ValueError):
    """A row the table cannot hold (a column it lacks, a value of the wrong type).

    The Delta transaction's data error (:meth:`DeltaTransaction.is_data_error`), so that the batch processor
    dead-letters the rows of that event alone (``row_rejected``) and writes the others, as it does when a
    database refuses a row.
    """


def check_delta_options(*, sessions: Any, mode: str, merge_keys: Sequence[str] | None) -> None:
    """Refuse what the Delta store cannot do honestly, naming the option and what to do instead."""
    if sessions is not None:
        raise sessions_refused("the Delta sink")
    if mode not in (APPEND, MERGE):
        raise SinkConfigError(f"delta_mode {mode!r} must be {APPEND!r} or {MERGE!r}")
    if mode == MERGE and not merge_keys:
        raise SinkConfigError("delta_mode 'merge' needs merge_keys: the columns that identify a row of the table")
    if mode == APPEND and merge_keys:
        raise SinkConfigError("merge_keys are used by delta_mode 'merge' only; set delta_mode='merge' or drop them")


@dataclass
class DeltaTarget:
    """
    Where and how rows are written.

    :param uri: the table: a local path, or ``abfss://container@account.dfs.core.windows.net/path`` /
        ``az://container/path`` on Azure storage.
    :param storage_options: delta-rs object store options (credentials: never logged).
    :param mode: ``append``, or ``merge`` (upsert on ``merge_keys``: a row whose keys match one of the
        table is updated, others are inserted; within a batch the last row of a key wins).
    :param merge_keys: the key columns of ``merge``.
    :param partition_by: partition columns of a table this store creates (an existing table must have them).
    :param dead_letter_uri: the dead-letter table; default ``<uri>_dead_letters``.
    :param target_file_size: bytes per data file delta-rs aims at (``None``: its default).
    :param evolve_columns: add a column for a field a typed event's schema gains (one commit of its own).
    """

    uri: str
    storage_options: dict[str, str] | None = None
    mode: str = APPEND
    merge_keys: Sequence[str] | None = None
    partition_by: Sequence[str] | None = None
    dead_letter_uri: str | None = None
    target_file_size: int | None = None
    evolve_columns: bool = True

    def __post_init__(self) -> None:
        if not self.uri or not isinstance(self.uri, str):
            raise SinkConfigError(f"table {self.uri!r}: give the Delta table's path or abfss:// / az:// URI")
        if self.dead_letter_uri is None:
            self.dead_letter_uri = dead_letter_uri(self.uri)
        if self.dead_letter_uri.rstrip("/") == self.uri.rstrip("/"):
            raise SinkConfigError("dead_letter_table must not be the table itself; leave it unset for <table>_dead_letters")

    def __repr__(self) -> str:  # no storage options: they hold the account key
        return f"DeltaTarget(uri={self.uri!r}, mode={self.mode!r}, dead_letter_uri={self.dead_letter_uri!r})"
