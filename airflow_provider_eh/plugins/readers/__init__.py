"""Everything the Event Hubs view reads: producer ledgers, consumer checkpoints and their lag, dead letters.

The view never writes. One module per thing read, all from one request's
:class:`~airflow_provider_eh.plugins.readers.reading.Reading` of a
:class:`~airflow_provider_eh.plugins.readers.reading.Source` (each connection read once, each client
built once):

- :mod:`~airflow_provider_eh.plugins.readers.reading`: the source, the request's reads, and how times
  and partition ids are written and ordered;
- :mod:`~airflow_provider_eh.plugins.readers.partitions`: the hub's partitions, through the SDK's
  management requests (shared between requests for a few seconds);
- :mod:`~airflow_provider_eh.plugins.readers.ledgers`: producer ledgers, through the state store's
  public ``read`` and ``history`` (the same decoding and checks as the engine);
- :mod:`~airflow_provider_eh.plugins.readers.consumers`: consumer groups' checkpoints, through
  :class:`~airflow_provider_eh.checkpoints.blob_layout.CheckpointReader`;
- :mod:`~airflow_provider_eh.plugins.readers.lag`: lag in events and in time, and the pool of
  background reads that finds the enqueued time of the oldest unprocessed event;
- :mod:`~airflow_provider_eh.plugins.readers.dead_letters`: dead letters, through
  :class:`~airflow_provider_eh.ingest.store.SqlIngestStore`.

Failures are reported by :mod:`~airflow_provider_eh.plugins.redaction`: what was read, the error's
class and what to check, never the error's text. Only names, numbers and times leave these modules.
Every name is importable from here (``readers.consumer_groups(...)``), as from the single module
this package was before.
"""

from __future__ import annotations

from airflow_provider_eh.plugins.readers.consumers import (
    CHECKPOINT,
    OWNERSHIP,
    consumer_groups,
    consumer_row,
    discover_consumer_groups,
)
from airflow_provider_eh.plugins.readers.dead_letters import dead_letters
from airflow_provider_eh.plugins.readers.lag import (
    PROBE_RETRY_AFTER,
    PROBE_THREADS,
    PROBE_TIMEOUT,
    PROBE_WAIT,
    first_unprocessed_times,
    lag_events,
    lag_seconds,
)
from airflow_provider_eh.plugins.readers.ledgers import (
    PRODUCER_STATE,
    READ_THREADS,
    committed_row,
    group_ledgers,
    is_stale,
    ledger_history,
    producer_groups,
    producer_state_blobs,
    summarise_state,
)
from airflow_provider_eh.plugins.readers.partitions import (
    PARTITION_IDS_TTL,
    PROPERTIES_TTL,
    PROPERTY_CLIENTS,
    partition_properties,
)
from airflow_provider_eh.plugins.readers.reading import Reading, Source, iso

__all__ = [
    "CHECKPOINT", "OWNERSHIP", "PARTITION_IDS_TTL", "PROBE_RETRY_AFTER", "PROBE_THREADS", "PROBE_TIMEOUT", "PROBE_WAIT",
    "PRODUCER_STATE", "PROPERTIES_TTL", "PROPERTY_CLIENTS", "READ_THREADS", "Reading", "Source", "committed_row",
    "consumer_groups", "consumer_row", "dead_letters", "discover_consumer_groups", "first_unprocessed_times",
    "group_ledgers", "is_stale", "iso", "lag_events", "lag_seconds", "ledger_history", "partition_properties",
    "producer_groups", "producer_state_blobs", "summarise_state",
]
