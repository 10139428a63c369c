"""Bringing executors' errors back to the driver as themselves (the Spark errors are in :mod:`airflow_provider_eh.errors`).

An error raised in a Python worker reaches the driver as Spark's ``PythonException`` (or a
``Py4JJavaError``) whose text holds the worker's traceback. :func:`raise_from_spark` finds the
provider error in that text and raises it again as its own class with its own message, so the
operator can tell a bad row (not retryable) from a lost executor (retryable).

A send that failed on an executor comes back as data (a ``SendOutcome``: the error's type name and
first line); :func:`executor_failure` maps an SDK or network error so reported with the one error map
(:mod:`airflow_provider_eh.client.failures`), at the driver's site of the hub, which knows the
connection id the executor does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from airflow_provider_eh import errors
from airflow_provider_eh.client.failures import UNKNOWN_CONNECTION, FailureSite, provider_error_of_report
from airflow_provider_eh.errors import EventHubsProviderError


def error_condition(exc: BaseException) -> str | None:
    """Spark's error condition of ``exc`` (``PATH_NOT_FOUND``, ``CANNOT_MODIFY_CONFIG``...), if it has one."""
    for name in ("getCondition", "getErrorClass"):
        getter = getattr(exc, name, None)
        if getter is not None:
            try:
                return getter()
            except Exception:
                return None
    return None


_WORKER_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+Error): (.+)$", re.MULTILINE)


def from_worker_text(text: str) -> EventHubsProviderError | None:
    """The last provider error named in a worker's traceback text, rebuilt; ``None`` if there is none."""
    found = None
    for name, message in _WORKER_ERROR.findall(text):
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, EventHubsProviderError) and cls.__init__ is Exception.__init__:
            found = cls(message.strip())
    return found


@contextmanager
def raise_from_spark() -> Iterator[None]:
    """Re-raise a provider error that an executor raised as itself; anything else unchanged."""
    try:
        yield
    except EventHubsProviderError:
        raise
    except Exception as exc:
        rebuilt = from_worker_text(str(exc))
        if rebuilt is None:
            raise
        raise rebuilt from None


def executor_failure(error_type: str | None, message: str, site: FailureSite) -> EventHubsProviderError | None:
    """The error map's error for a send an executor reported failed with ``error_type: message``, at ``site``
    (the hub, with what already happened); ``None`` when the map does not read that type.

    An executor's error already mapped there (by the read-back) is rebuilt as its class, with the
    connection id the executor could not know.
    """
    mapped = provider_error_of_report(error_type, message, site)
    if mapped is not None:
        return mapped
    cls = getattr(errors, error_type or "", None)
    unknown = f"Connection {UNKNOWN_CONNECTION!r}: "
    if not (isinstance(cls, type) and issubclass(cls, EventHubsProviderError) and message.startswith(unknown)):
        return None
    text = message[len(unknown):] + (f" {site.done}" if site.done else "")
    if issubclass(cls, errors.ConnectionConfigError):
        return cls(site.conn_id, text)
    if cls.__init__ is not Exception.__init__:
        return None
    rebuilt = cls(f"Connection {site.conn_id!r}: {text}")
    rebuilt.conn_id = site.conn_id
    return rebuilt
