"""Errors across the triggerer's boundary: a trigger reports its error as data, the task raises it again.

A trigger runs in the triggerer and can hand the task only JSON. :func:`error_event` writes an error
as ``{"status": "error", "message", "retryable", "error_type", "conn_id"}``: its text, whether a retry
can help, the name of its class in :mod:`airflow_provider_eh.errors` and the connection at fault.
:func:`reported_error` makes the same error again on the task's side (of that class, only ever one of
the package's own: nothing else named in an event is instantiated), and :func:`task_error` is what the
task raises for it, by the rule of :mod:`airflow_provider_eh.operators.task_errors`: ``AirflowFailException``
when a retry cannot help, else the error itself, class kept, so Airflow retries it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from airflow_provider_eh import errors
from airflow_provider_eh.errors import EventHubsProviderError, TriggerReportedError


def error_event(exc: BaseException) -> dict[str, Any]:
    """The error event of ``exc``: any error not the package's counts as retryable, as Airflow's default has it."""
    event: dict[str, Any] = {"status": "error", "message": f"{type(exc).__name__}: {exc}", "retryable": True}
    if isinstance(exc, EventHubsProviderError):
        event.update(retryable=bool(exc.retryable), error_type=type(exc).__name__)
        if exc.conn_id:
            event["conn_id"] = exc.conn_id
    return event


def reported_error(event: Mapping[str, Any], message: str | None = None) -> EventHubsProviderError:
    """
    The error an error event reports, of the class it names when that is one of :mod:`airflow_provider_eh.errors`
    (else :class:`~airflow_provider_eh.errors.TriggerReportedError`), with its ``retryable`` and ``conn_id``.
    An event without the flag (from an older trigger) counts as retryable.

    :param message: the new error's text; default: the event's.
    """
    text = str(event.get("message", "")) if message is None else message
    retryable = event.get("retryable") is not False
    found = getattr(errors, str(event.get("error_type") or ""), None)
    if isinstance(found, type) and issubclass(found, EventHubsProviderError) and found is not TriggerReportedError:
        error: EventHubsProviderError = found.__new__(found)
        Exception.__init__(error, text)  # its own __init__ would word the text again
    else:
        error = TriggerReportedError(text, retryable)
    error.retryable = retryable
    error.conn_id = event.get("conn_id") or None
    return error


def task_error(task_id: str, doing: str, event: Mapping[str, Any]) -> BaseException:
    """
    What a task raises for a trigger's error event: ``Task '<id>': <doing> failed: <the trigger's message>``,
    as ``AirflowFailException`` (chained to the reported error) when a retry cannot help, else as the reported
    error's own class (``AirflowException`` for an error that is not the package's).
    """
    text = f"Task {task_id!r}: {doing} failed: {event.get('message', '')}"
    error = reported_error(event, text)
    if not error.retryable:
        failed = AirflowFailException(text)
        failed.__cause__ = error
        return failed
    if isinstance(error, TriggerReportedError):
        return AirflowException(text)
    return error
