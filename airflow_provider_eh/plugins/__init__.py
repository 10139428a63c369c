"""The Event Hubs view: an Airflow 3 plugin (a JSON API in the API server and a page in the UI navigation)."""
