"""Publishing a Spark job's output exactly once; no Airflow import here.

- :mod:`.mapping`: row → event (body, properties, partition, order) by the engine's event rulebook
  (:mod:`airflow_provider_eh.publishing.rulebook`), pickled to executors;
- :mod:`.executor`: what executors run over Arrow batches (map, fingerprint pass, send pass);
- :mod:`.job`: the driver (:class:`~.job.SparkPublishJob`, :class:`~.job.SparkSource`), running the
  engine's one driver loop (:mod:`airflow_provider_eh.publishing.driver`) with executors as senders;
- :mod:`.session`: getting a SparkSession for a master or Spark Connect URL;
- :mod:`.errors`: the errors of this path, and executors' errors rebuilt on the driver.

The Airflow face is :class:`airflow_provider_eh.operators.spark_publish.SparkToEventHubOperator`.
"""
