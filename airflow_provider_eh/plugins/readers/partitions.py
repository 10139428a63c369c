"""The hub's partitions as the view shows them: sequence numbers and last enqueued times, shared between requests.

Partition properties are cached for :data:`PROPERTIES_TTL` seconds (every open tab refreshes the lag;
they share one read), the hub's partition ids for :data:`PARTITION_IDS_TTL` seconds.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.readers.reading import Reading, iso, partition_sort_key, read_failure

PROPERTY_CLIENTS = 8
PROPERTIES_TTL = 2.0
PARTITION_IDS_TTL = 60.0

_PROPERTIES = Cache(PROPERTIES_TTL, 256)
_PARTITION_IDS = Cache(PARTITION_IDS_TTL, 256)


def partition_properties(reading: Reading) -> dict[str, dict[str, Any]]:
    """Per partition: first and last enqueued sequence numbers and the last enqueued time (shared for
    :data:`PROPERTIES_TTL` seconds between requests on the same connection and hub).

    The SDK opens a connection per management request, so the partitions are asked about from
    :data:`PROPERTY_CLIENTS` clients at once, each with a share of them.
    """
    endpoint = reading.endpoint
    key = (reading.source.event_hubs_conn_id, endpoint.fully_qualified_namespace, endpoint.eventhub_name)
    what = (f"reading the partitions of Event Hub {endpoint.eventhub_name!r} on {endpoint.fully_qualified_namespace} "
            f"(connection {reading.source.event_hubs_conn_id!r})")

    def load() -> dict[str, dict[str, Any]]:
        try:
            partition_ids = _PARTITION_IDS.get(key, lambda: _partition_ids(endpoint))

            def share(ids: list[str]) -> dict[str, Any]:
                with endpoint.producer(retry_total=1) as own:
                    return {pid: own.get_partition_properties(pid) for pid in ids}

            shares = [s for s in (partition_ids[i::PROPERTY_CLIENTS] for i in range(PROPERTY_CLIENTS)) if s]
            props: dict[str, Any] = {}
            with ThreadPoolExecutor(len(shares) or 1) as pool:
                for part in pool.map(share, shares):
                    props.update(part)
        except Exception as exc:
            raise read_failure(what, exc, reading.hub_site(),
                               "Check the namespace, the hub name and the connection's credentials.") from None
        return {
            pid: {
                "beginning_sequence_number": int(props[pid].get("beginning_sequence_number", 0)),
                "last_enqueued_sequence_number": int(props[pid]["last_enqueued_sequence_number"]),
                "last_enqueued_time": iso(props[pid].get("last_enqueued_time_utc")),
            }
            for pid in sorted(props, key=partition_sort_key)
        }

    return _PROPERTIES.get(key, load)


def _partition_ids(endpoint: Any) -> list[str]:
    """The hub's partition ids, asked once: no retry, so a hub that is not there is said at once (a refresh
    asks again)."""
    with endpoint.producer(retry_total=0) as client:
        return [str(p) for p in client.get_eventhub_properties()["partition_ids"]]
