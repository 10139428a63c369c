"""Compact and vacuum a Delta table the ingest operator writes (``sink="delta"``).

A thin shell over :func:`airflow_provider_eh.ingest.sinks.delta.maintain`: ``optimize`` rewrites small files into
large ones in one commit (rows and checkpoints unchanged), ``vacuum`` deletes the files no version within
the retention reads any more. An ingest task's commits only add files, so it may run meanwhile; a
compaction that loses a race with another commit fails and is retried by the task's next try.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_provider_eh.hooks.blob import BlobStorageHook, delta_storage_options
from airflow_provider_eh.ingest.sinks.delta import maintain
from airflow_provider_eh.operators.task_errors import airflow_errors

if TYPE_CHECKING:
    from airflow.sdk import Context


class DeltaTableMaintenanceOperator(BaseOperator):
    """
    Compact a Delta table's small files, and optionally vacuum what no recent version reads.

    Returns (XCom) ``{version_before, version_after, optimize: {numFilesAdded, numFilesRemoved, ...},
    vacuumed_files}``: counts only, never the storage options.

    :param table: the table's local path or ``abfss://`` / ``az://`` URI, as given to the ingest operator. (templated)
    :param wasb_conn_id: the ``wasb`` connection of an Azure URI. (templated)
    :param optimize: compact small files into files of about ``target_size`` bytes.
    :param target_size: bytes per compacted file (``None``: delta-rs' default, 100 MiB).
    :param vacuum_retention_hours: delete files that no version of the last this many hours reads
        (``None``: no vacuum); readers reading older versions (time travel) then fail. Delta's usual
        retention is 168 hours (7 days).
    """

    template_fields: Sequence[str] = ("table", "wasb_conn_id")
    ui_color = "#e3f1e0"

    def __init__(
        self,
        *,
        table: str,
        wasb_conn_id: str = BlobStorageHook.default_conn_name,
        optimize: bool = True,
        target_size: int | None = None,
        vacuum_retention_hours: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.wasb_conn_id = wasb_conn_id
        self.optimize = optimize
        self.target_size = target_size
        self.vacuum_retention_hours = vacuum_retention_hours

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(self.task_id):
            hours = None if self.vacuum_retention_hours in (None, "", "None") else float(self.vacuum_retention_hours)
            result = maintain(
                str(self.table), delta_storage_options(str(self.table), self.wasb_conn_id), optimize=bool(self.optimize),
                vacuum_hours=hours, target_size=None if self.target_size is None else int(self.target_size),
            )
        self.log.info("Delta table %s: version %s -> %s; %s", self.table, result["version_before"],
                      result["version_after"], result.get("optimize"))
        return result
