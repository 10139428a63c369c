"""On the PYTHONPATH of a crash test's subprocesses (Spark's Python workers, an Airflow task):
arms the crash point named by ``AIRFLOW_PROVIDER_EH_CRASH_AT`` (or the pause point named by
``AIRFLOW_PROVIDER_EH_PAUSE_AT``) in every Python process started."""

import os

if os.environ.get("AIRFLOW_PROVIDER_EH_CRASH_AT") or os.environ.get("AIRFLOW_PROVIDER_EH_PAUSE_AT"):
    from airflow_provider_eh.testing.crash import crash_at_from_env

    crash_at_from_env()
