"""Airflow sensors: wait for an event that matches a filter, or for consumer groups to checkpoint past
what was published; both defer to the triggers of :mod:`airflow_provider_eh.triggers`."""
