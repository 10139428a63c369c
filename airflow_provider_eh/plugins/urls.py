"""Where the Event Hubs view is served: its prefix in the API server, under Airflow's own base path."""

from __future__ import annotations

from urllib.parse import urlsplit

URL_PREFIX = "/eventhubs"


def base_path() -> str:
    """The path Airflow is served under (``[api] base_url``'s path), ending in ``/``: ``/`` when it has none."""
    from airflow.configuration import conf

    path = urlsplit(conf.get("api", "base_url", fallback="") or "").path
    return path.rstrip("/") + "/"
