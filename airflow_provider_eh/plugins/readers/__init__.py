"""Everything the Event Hubs view reads: producer ledgers, consumer checkpoints and their lag, dead letters.

The view never writes. One module per thing read, all from one request's
:class:`~airflow_provider_eh.plugins.readers.reading.Reading` of a
:class:`~airflow_provider_eh.plugins.readers.reading.Source` (each connection read once, each client
built once):

- :mod:`~airflow_provider_eh.plugins.readers.reading`: the source, the request's reads, and how times
  and partition ids are written and ordered;
- :mod:`~airflow_provider_eh.plugins.readers.discovery`: the ``azure_event_hubs`` connections, where their
  state lives (the request, the connection's fields, the provider's configuration) and the hubs found;
- :mod:`~airflow_provider_eh.plugins.readers.variables`: producer states of the Airflow Variables backend,
  read from the metadata database without writing;
- :mod:`~airflow_provider_eh.plugins.readers.partitions`: the hub's partitions, through the SDK's
  management requests (shared between requests for a few seconds);
- :mod:`~airflow_provider_eh.plugins.readers.ledgers`: producer ledgers, through the state store's
  public ``read`` and ``history`` (the same decoding and checks as the engine);
- :mod:`~airflow_provider_eh.plugins.readers.consumers`: consumer groups' checkpoints, through
  :class:`~airflow_provider_eh.checkpoints.blob_layout.CheckpointReader`;
- :mod:`~airflow_provider_eh.plugins.readers.lag`: lag in events and in time, and the pool of
  background reads that finds the enqueued time of the oldest unprocessed event;
- :mod:`~airflow_provider_eh.plugins.readers.dead_letters`: dead letters, through
  :class:`~airflow_provider_eh.ingest.sinks.sql.store.SqlIngestStore`.

Failures are reported by :mod:`~airflow_provider_eh.plugins.redaction`: what was read, the error's
class and what to check, never the error's text. Only names, numbers and times leave these modules.
Callers import from the module that holds a name.
"""
