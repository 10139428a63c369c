"""``foreachBatch`` into a Delta table, each micro-batch exactly once: the batch id in the same Delta commit.

::

    sink = DeltaBatchSink("abfss://lake@<account>.dfs.core.windows.net/orders", app_id="orders-from-eventhubs")
    stream.writeStream.foreachBatch(sink).option("checkpointLocation", ...).start()

Spark runs a micro-batch again after a crash between the sink's write and its own commit log, with
the same offsets (the reader's ranges are fixed in Spark's offset log). Each commit carries a Delta
*application transaction* ``(app_id, batch id)`` in its log, as the ingestion's Delta sink keeps its
checkpoints; a micro-batch whose id the table's log already holds is not written again. Written with
``deltalake`` (delta-rs) from the driver: no Delta jars on the cluster, the rows collected as Arrow
(a micro-batch is bounded by ``maxEventsPerTrigger``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)


class DeltaBatchSink:
    """
    A ``foreachBatch`` function writing each micro-batch into a Delta table once.

    :param uri: the table (a local path, ``abfss://``, ``s3://``); created by the first micro-batch.
    :param app_id: the stream's stable name in the table's log: one per query writing the table.
    :param storage_options: delta-rs's storage options (an account key, a SAS token); ``None``: the environment's.
    :param partition_by: the table's partition columns, when the first micro-batch creates it.
    """

    def __init__(self, uri: str, app_id: str, *, storage_options: dict[str, str] | None = None,
                 partition_by: Sequence[str] | None = None):
        self.uri = uri
        self.app_id = app_id
        self.storage_options = storage_options
        self.partition_by = list(partition_by) if partition_by else None

    def __repr__(self) -> str:  # no storage options: they hold secrets
        return f"DeltaBatchSink(uri={self.uri!r}, app_id={self.app_id!r})"

    def written_version(self) -> int | None:
        """The last micro-batch id the table's log holds for :attr:`app_id` (``None``: none, or no table)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            table = DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        version = table.transaction_version(self.app_id)
        return None if version is None else int(version)

    def __call__(self, df: Any, batch_id: int) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake

        done = self.written_version()
        if done is not None and done >= batch_id:
            log.info("Delta table %s: micro-batch %d of %s is in the table already (it holds %d); not written again",
                     self.uri, batch_id, self.app_id, done)
            return
        rows = df.toArrow()
        write_deltalake(self.uri, rows, mode="append", partition_by=self.partition_by,
                        storage_options=self.storage_options,
                        commit_properties=CommitProperties(app_transactions=[Transaction(self.app_id, int(batch_id))]))
        log.info("Delta table %s: micro-batch %d of %s written, %d rows", self.uri, batch_id, self.app_id, rows.num_rows)
