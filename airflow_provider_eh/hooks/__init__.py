"""Airflow hooks: ``azure_event_hubs`` and ``wasb`` connections turned into the endpoints, blob clients,
producer-state stores and checkpoint reads that the engines below take."""
