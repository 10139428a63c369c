"""Dead letters of the configured SQL sink as the view shows them: counts by reason, and the command that replays them.

They are read through :class:`~airflow_provider_eh.ingest.sinks.sql.store.SqlIngestStore`, never written.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_eh.plugins.readers.reading import Reading
from airflow_provider_eh.plugins.redaction import failure


def dead_letters(reading: Reading) -> dict[str, Any] | None:
    """Dead letters of the configured SQL sink by reason, and the command that replays them."""
    from airflow_provider_eh.ingest.sinks.sql.store import SqlIngestStore, Stream
    from airflow_provider_eh.ingest.sinks.sql.tables import DEFAULT_PREFIX

    source = reading.source
    if not source.sql_conn_id:
        return None
    endpoint = reading.endpoint
    prefix = source.sink_prefix or DEFAULT_PREFIX
    conn = reading.connection(source.sql_conn_id)
    try:
        store = SqlIngestStore(conn.get_hook().get_conn(),
                               Stream(endpoint.namespace, endpoint.eventhub_name, source.sink_consumer_group),
                               prefix=prefix, create_tables=False)
        try:
            letters = store.dead_letters(status="dead")
        finally:
            store.close()
    except Exception as exc:
        raise failure(f"reading dead letters through connection {source.sql_conn_id!r} (table prefix {prefix!r})", exc,
                      "Check the sink's connection and table prefix.") from None
    reasons: dict[str, dict[str, Any]] = {}
    for letter in letters:
        entry = reasons.setdefault(letter.reason, {"reason": letter.reason, "count": 0, "partitions": {}, "oldest": None})
        entry["count"] += 1
        pid = letter.event.partition_id
        entry["partitions"][pid] = entry["partitions"].get(pid, 0) + 1
        if entry["oldest"] is None or str(letter.failed_at) < entry["oldest"]:
            entry["oldest"] = str(letter.failed_at)
    command = (
        f"python -m airflow_provider_eh.ingest --sql-conn-id {source.sql_conn_id} --namespace {endpoint.namespace} "
        f"--eventhub {endpoint.eventhub_name} --consumer-group '{source.sink_consumer_group}'"
        + (f" --prefix {prefix}" if prefix != DEFAULT_PREFIX else "")
        + " --table <target table> --row-function <package.module:function> replay"
    )
    return {
        "sql_conn_id": source.sql_conn_id, "consumer_group": source.sink_consumer_group, "total": len(letters),
        "by_reason": sorted(reasons.values(), key=lambda r: (-r["count"], r["reason"])), "replay_command": command,
    }
