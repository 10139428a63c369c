"""The ``eventhubs`` data source for PySpark 4: ``df.write.format("eventhubs")`` and ``df.writeStream.format("eventhubs")``.

No Airflow import: a Spark job on any cluster runs it with the provider's wheel and the Azure SDKs.

- :mod:`.options`: the options, read and checked once (:class:`~.options.WriteOptions`);
- :mod:`.staging`: what each task stages in the state container, and how the driver reads it back in batch order;
- :mod:`.publish`: the driver publishing a staged batch exactly once with the engine;
- :mod:`.source`: the Spark classes (:class:`~.source.EventHubsDataSource`), importable where PySpark is.
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
