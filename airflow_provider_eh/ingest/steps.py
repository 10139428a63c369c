"""The steps of an ingestion batch as announced to :mod:`airflow_provider_eh.publishing.steps`.

``ingest_<stage>`` for each stage of :data:`airflow_provider_eh.ingest.runner.STAGES`, with the
batch's number in this process as the count; crash tests kill at one of them with
:func:`airflow_provider_eh.testing.crash.crash_at` (``"ingest_committed:3"``: at the commit of the
third batch, or the first after it whose step is announced). Nothing in production observes them.
"""

INGEST_STEPS = ("ingest_received", "ingest_rows_written", "ingest_committed", "ingest_blob_checkpointed")
