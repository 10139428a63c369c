"""The client layer: how to reach a hub and read it, below both publishing and ingestion.

- :mod:`~airflow_provider_eh.client.endpoint`: :class:`EventHubsEndpoint`, plain data naming one hub,
  and the package's one factory of SDK clients;
- :mod:`~airflow_provider_eh.client.receive`: :class:`PartitionReader`, pull-style batches of one partition;
- :mod:`~airflow_provider_eh.client.readback`: a partition read back up to its end (publishing's recovery,
  tests and scripts that count what landed).

Nothing here imports Airflow, the publishing engine or the consumer side.
"""
