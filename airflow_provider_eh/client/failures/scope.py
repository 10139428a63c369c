"""The site of an endpoint (:func:`site_of`), of a checkpoint container's failure (:func:`storage_failure`), and the
scope of sites the package kept before sites were passed explicitly (:func:`failure_scope`, :func:`note_site`: deprecated).

A failure's site is handed to the map by whoever knows it: an endpoint carries the connection id it was read
from (its hook sets it), so a layer that knows only the endpoint (read-back, Spark's driver, the engine)
names the connection; an Airflow task hands the sites it learns to its error mapping
(:func:`airflow_provider_eh.operators.task_errors.airflow_errors`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from airflow_provider_eh.client.failures.classify import provider_error
from airflow_provider_eh.client.failures.reading import is_storage_error
from airflow_provider_eh.client.failures.sites import BLOB_STORAGE, UNKNOWN_CONNECTION, FailureSite
from airflow_provider_eh.errors import CheckpointStoreError

if TYPE_CHECKING:
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint

#: the release that removes :func:`failure_scope` and :func:`note_site`
REMOVED_IN = "2.0.0"


def site_of(endpoint: EventHubsEndpoint, *, done: str = "") -> FailureSite:
    """The site of ``endpoint``'s hub, named by the connection it was read from (:attr:`EventHubsEndpoint.conn_id`);
    :data:`UNKNOWN_CONNECTION` for an endpoint built without one."""
    return FailureSite.of_endpoint(endpoint.conn_id or UNKNOWN_CONNECTION, endpoint, done=done)


@contextmanager
def failure_scope(*sites: FailureSite) -> Iterator[list[FailureSite]]:
    """Deprecated: map the SDK errors raised inside at ``sites`` (a storage error at the last blob site, any other
    at the last Event Hubs site). An endpoint now names its own connection (:func:`site_of`), and a task hands its
    sites to ``airflow_errors``; nothing is found at a distance any more, so :func:`note_site` adds nothing."""
    warnings.warn(f"failure_scope is deprecated and will be removed in {REMOVED_IN}: map with provider_errors(site), "
                  "or hand the task's sites to airflow_errors", DeprecationWarning, stacklevel=3)
    known = list(sites)
    try:
        yield known
    except Exception as exc:
        storage = is_storage_error(exc)
        site = next((s for s in reversed(known) if (s.service == BLOB_STORAGE) == storage), None)
        mapped = provider_error(exc, site) if site is not None else None
        if mapped is None:
            raise
        raise mapped from exc


def note_site(site: FailureSite) -> None:
    """Deprecated, and does nothing: hand ``site`` to the error mapping that needs it (``airflow_errors``' sites,
    :func:`~airflow_provider_eh.client.failures.provider_errors`)."""
    warnings.warn(f"note_site is deprecated and will be removed in {REMOVED_IN}: pass the site explicitly",
                  DeprecationWarning, stacklevel=2)


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
