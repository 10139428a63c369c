"""How the provider names what it reads and writes, for Airflow assets and OpenLineage datasets alike.

One naming, used by the operators' OpenLineage facets and by the example DAGs' ``Asset`` URIs, so a
lineage graph and Airflow's asset graph show the same nodes:

- an Event Hub: namespace ``eventhubs://<fully qualified namespace>`` (lower case; ``host:port`` for
  the local endpoint), name ``<hub>``; as an asset URI ``eventhubs://<fqdn>/<hub>``;
- a file or directory: namespace ``file``, name its absolute path; a URL ``scheme://authority/path``
  (``abfss://container@account.dfs.core.windows.net/orders``): namespace ``scheme://authority``,
  name ``path`` without its leading slash;
- a SQL table: namespace ``<connection type>://<host>[:<port>]`` (for SQLite, the database file
  path), name ``[<schema>.]<table>``.

Plain strings, no Airflow or OpenLineage import.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

EVENT_HUBS_SCHEME = "eventhubs"


def eventhubs_namespace(fully_qualified_namespace: str) -> str:
    """``eventhubs://<fqdn>``: the OpenLineage namespace of every hub of an Event Hubs namespace."""
    fqdn = fully_qualified_namespace.split("://", 1)[-1].strip("/").lower()
    if not fqdn:
        raise ValueError("an Event Hubs namespace is needed, e.g. 'mynamespace.servicebus.windows.net'")
    return f"{EVENT_HUBS_SCHEME}://{fqdn}"


def eventhub_dataset(fully_qualified_namespace: str, eventhub_name: str) -> tuple[str, str]:
    """``(namespace, name)`` of one hub."""
    if not eventhub_name:
        raise ValueError("an Event Hub name is needed")
    return eventhubs_namespace(fully_qualified_namespace), eventhub_name


def eventhub_uri(fully_qualified_namespace: str, eventhub_name: str) -> str:
    """``eventhubs://<fqdn>/<hub>``: the Airflow asset URI of one hub."""
    namespace, name = eventhub_dataset(fully_qualified_namespace, eventhub_name)
    return f"{namespace}/{name}"


def path_dataset(path: str) -> tuple[str, str]:
    """``(namespace, name)`` of a file or directory: a local path or a ``scheme://authority/path`` URL."""
    parts = urlsplit(path)
    if parts.scheme and parts.scheme != "file" and len(parts.scheme) > 1:  # "C:" is a drive, not a scheme
        return f"{parts.scheme}://{parts.netloc}", parts.path.lstrip("/")
    local = parts.path if parts.scheme == "file" else path
    return "file", os.path.abspath(local).rstrip("/") or "/"


def path_uri(path: str) -> str:
    """The Airflow asset URI of a file or directory (``file:///abs/path`` for a local one)."""
    namespace, name = path_dataset(path)
    return f"file://{name}" if namespace == "file" else f"{namespace}/{name}"


def table_dataset(conn_type: str, host: str | None, table: str, *, port: int | None = None,
                  schema: str | None = None) -> tuple[str, str]:
    """``(namespace, name)`` of a SQL table behind an Airflow connection."""
    authority = (host or "").rstrip("/")
    if port:
        authority = f"{authority}:{port}"
    name = f"{schema}.{table}" if schema and conn_type != "sqlite" else table
    return f"{conn_type}://{authority}", name
