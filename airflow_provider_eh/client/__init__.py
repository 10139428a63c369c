"""The client layer: how to reach a hub and read it, below both publishing and ingestion.

- :mod:`~airflow_provider_eh.client.endpoint`: :class:`EventHubsEndpoint`, plain data naming one hub,
  and the package's one factory of SDK clients;
- :mod:`~airflow_provider_eh.client.partition_readers`: :class:`PartitionsReader`, pull-style batches of several
  partitions received on one thread (:class:`PartitionReader`: of one);
- :mod:`~airflow_provider_eh.client.partitions`: the check of the partition ids a caller names against the hub's;
- :mod:`~airflow_provider_eh.client.received_fields`: a received event's fields, read from its AMQP message or ``EventData``;
- :mod:`~airflow_provider_eh.client.readback`: a partition read back up to its end (publishing's recovery,
  tests and scripts that count what landed).

Nothing here imports Airflow, the publishing engine or the consumer side.
"""
