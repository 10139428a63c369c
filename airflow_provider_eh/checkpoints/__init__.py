"""Event Hubs consumer checkpoints: where downstream consumer groups stand.

- :mod:`~airflow_provider_eh.checkpoints.blob_layout`: reading checkpoints and ownership from the
  standard ``BlobCheckpointStore`` layout every Azure SDK writes (both namespace spellings, newest wins);
- :mod:`~airflow_provider_eh.checkpoints.lag`: comparing them with target sequence numbers (the lag model).

No Airflow import. The sensor's target parsing (publish task output -> targets) is in
:mod:`airflow_provider_eh.sensors.checkpoint`.
"""
