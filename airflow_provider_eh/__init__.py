"""Exactly-once publishing to and ingestion from Azure Event Hubs for Apache Airflow 3."""

from __future__ import annotations

__version__ = "1.1.0"
