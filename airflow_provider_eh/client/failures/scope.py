"""The sites of the work in progress: a task's :func:`failure_scope`, the sites it notes, and the site of an endpoint
found in it by layers that do not know the connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from airflow_provider_eh.client.failures.classify import provider_error
from airflow_provider_eh.client.failures.sites import EVENT_HUBS, UNKNOWN_CONNECTION, FailureSite
from airflow_provider_eh.errors import (
    CheckpointStoreError,
)

if TYPE_CHECKING:
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint

_SITES: ContextVar[list[FailureSite] | None] = ContextVar("airflow_provider_eh_failure_sites", default=None)


@contextmanager
def failure_scope(*sites: FailureSite) -> Iterator[list[FailureSite]]:
    """A scope whose failures happen at ``sites`` and at the sites :func:`note_site` adds while it is open.

    An Airflow task opens one around its work (``operators/task_errors.py``); the layers below it that know
    an endpoint but not the connection it came from (Spark's driver) find the connection with
    :func:`site_of`. Nested scopes see the sites of the scopes around them.
    """
    known = [*(_SITES.get() or ()), *sites]
    token = _SITES.set(known)
    try:
        yield known
    finally:
        _SITES.reset(token)


def note_site(site: FailureSite) -> None:
    """Add ``site`` to the open :func:`failure_scope` (nothing when none is open)."""
    sites = _SITES.get()
    if sites is not None and site not in sites:
        sites.append(site)


def site_of(endpoint: EventHubsEndpoint, *, done: str = "") -> FailureSite:
    """The open scope's site of ``endpoint``'s hub; without one, a site whose connection id is
    :data:`UNKNOWN_CONNECTION`."""
    address = FailureSite.of_endpoint(UNKNOWN_CONNECTION, endpoint).address
    for site in reversed(_SITES.get() or []):
        if site.service == EVENT_HUBS and site.hub == endpoint.eventhub_name and site.address == address:
            return site.having_done(done) if done else site
    return FailureSite.of_endpoint(UNKNOWN_CONNECTION, endpoint, done=done)


def storage_failure(exc: BaseException, site: FailureSite) -> BaseException:
    """
    The error map's error for a failure of a checkpoint container at ``site``; ``exc`` when it maps to nothing.

    The checkpoint reader words a storage error as a ``CheckpointStoreError`` of its own, without the
    connection or the account's address: the storage error it was raised from is mapped instead. Any
    other error of the package (the hub's, mapped by its hook) is returned as it is.
    """
    cause = exc.__cause__ if isinstance(exc, CheckpointStoreError) else exc
    mapped = provider_error(cause, site) if cause is not None else None
    return exc if mapped is None else mapped
