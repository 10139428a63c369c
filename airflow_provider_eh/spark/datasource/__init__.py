"""The ``eventhubs`` data source for PySpark 4: ``df.write.format("eventhubs")`` and ``df.writeStream.format("eventhubs")``,
``spark.read.format("eventhubs")`` and ``spark.readStream.format("eventhubs")``.

No Airflow import: a Spark job on any cluster runs it with the provider's wheel and the Azure SDKs.

- :mod:`.options`: the options, read and checked once (:class:`~.options.WriteOptions`);
- :mod:`.staging`: what each task stages in the state container, and how the driver reads it back in batch order;
- :mod:`.publish`: the driver publishing a staged batch exactly once with the engine;
- :mod:`.source`: the Spark classes (:class:`~.source.EventHubsDataSource`), importable where PySpark is.

Reading: :mod:`.read_options` and :mod:`.positions` (the reader's options), :mod:`.offsets` (a stream's offsets and
admission control), :mod:`.hub_state` (what the driver asks the hub), :mod:`.ranges` (a task reading its range into
Arrow), :mod:`.typed_columns` (typed columns), :mod:`.consumer_checkpoints` (the consumer group's checkpoints),
:mod:`.read_source` (the Spark reader classes) and :mod:`.delta_batches` (``foreachBatch`` into Delta, each
micro-batch once).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_eh.spark.datasource.options import FORMAT, DataSourceOptionError, WriteOptions, identity_batch_id

__all__ = ["FORMAT", "DataSourceOptionError", "EventHubsDataSource", "WriteOptions", "identity_batch_id", "register"]


def __getattr__(name: str) -> Any:
    """The Spark classes, imported on first use: the options and identities need no PySpark."""
    if name in ("EventHubsDataSource", "register"):
        from airflow_provider_eh.spark.datasource import source

        return getattr(source, name)
    raise AttributeError(name)
