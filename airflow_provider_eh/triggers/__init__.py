"""Airflow triggers: the sensors' deferred waits, and the event trigger that starts DAG runs on a hub's
events (``AssetWatcher``)."""
