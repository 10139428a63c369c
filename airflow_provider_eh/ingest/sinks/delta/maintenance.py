"""A Delta table's upkeep: compaction and vacuum (no Airflow import); ``DeltaTableMaintenanceOperator`` runs it."""

from __future__ import annotations

from typing import Any

from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest.sinks.delta.store import open_table


def maintain(
    uri: str, storage_options: dict[str, str] | None = None, *, optimize: bool = True, vacuum_hours: float | None = None,
    target_size: int | None = None,
) -> dict[str, Any]:
    """
    Compact small files (``optimize``: one commit that rewrites them, rows and checkpoints unchanged) and remove
    files no version younger than ``vacuum_hours`` reads (``vacuum``; ``None``: none removed). Returns the metrics.
    """
    table = open_table(uri, storage_options)
    if table is None:
        raise SinkConfigError(f"table {uri!r}: there is no Delta table there to maintain")
    result: dict[str, Any] = {"version_before": table.version()}
    if optimize:
        result["optimize"] = table.optimize.compact(target_size=target_size)
    if vacuum_hours is not None:
        if vacuum_hours < 0:
            raise SinkConfigError(f"vacuum_retention_hours must be 0 or more, not {vacuum_hours}")
        removed = table.vacuum(retention_hours=int(vacuum_hours), dry_run=False, enforce_retention_duration=False)
        result["vacuumed_files"] = len(removed)
    result["version_after"] = table.version()
    return result
