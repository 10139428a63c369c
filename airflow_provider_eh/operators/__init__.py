"""Airflow operators: thin shells that adapt a task's arguments, call the publishing or ingestion engine
and map its errors to Airflow's."""
