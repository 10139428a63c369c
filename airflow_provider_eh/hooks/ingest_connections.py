"""The Airflow connections of the ingestion command line (``python -m airflow_provider_eh.ingest``).

The command line is the ingestion engine's and imports neither Airflow nor this package's Airflow shell
(``tests/repo/test_layers.py``). What its options name in Airflow is read here: ``--sql-conn-id`` (an
Airflow SQL connection, through its provider's hook), ``--wasb-conn-id`` (the credentials of a Delta table on
Azure storage) and ``--schema-registry-conn-id`` (the Schema Registry that decodes typed dead letters).
:class:`AirflowConnections` is what the command line loads, by its name, when one of them is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_eh.client.schema_registry import SchemaRegistryEndpoint
from airflow_provider_eh.hooks.blob import delta_storage_options
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook


class AirflowConnections:
    """Airflow connections as the ingestion command line uses them
    (:class:`~airflow_provider_eh.ingest.__main__.Connections`)."""

    def sql(self, conn_id: str) -> Any:
        """A DB-API connection of the Airflow SQL connection ``conn_id``, from its provider's hook."""
        return BaseHook.get_connection(conn_id).get_hook().get_conn()

    def delta_storage_options(self, uri: str, wasb_conn_id: str) -> dict[str, str] | None:
        """The object store options of the Delta table at ``uri``: those of
        :func:`~airflow_provider_eh.hooks.blob.delta_storage_options`."""
        return delta_storage_options(uri, wasb_conn_id)

    def schema_registry(self, conn_id: str) -> Callable[[], SchemaRegistryEndpoint]:
        """The Schema Registry of the ``azure_event_hubs`` connection ``conn_id``, read when first asked for."""
        return lambda: SchemaRegistryHook(conn_id).get_endpoint()
