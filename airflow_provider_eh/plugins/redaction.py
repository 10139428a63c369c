"""What the Event Hubs view may say: failures without their raw text, responses without a connection's secrets.

A storage or AMQP error's text can carry what a credential produced (a request signature, a SAS
token, a connection string echoed by a parser), so the view never passes one on: a failed read is
described by what was being read, the error's class and what usually causes it
(:func:`failure`), and the raw text goes only to the API server's log, through Airflow's secrets
masker. As a second line, every response is scrubbed (:func:`scrub`) of the secrets of the
connections the request named (:func:`connection_secrets`) and of everything registered with the masker.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from airflow_provider_eh.errors import ViewReadError

log = logging.getLogger(__name__)

#: extra fields whose values are secrets, by a part of their name (``connection_string``, ``sas_token``, ...)
SECRET_FIELD_PARTS = ("secret", "password", "key", "token", "connection_string", "sas")
#: ``key=value`` segments of connection strings whose values are secrets
SECRET_SEGMENTS = ("sharedaccesskey", "accountkey", "sharedaccesssignature", "sig")
#: shorter strings are not scrubbed (Airflow's masker skips them too): they would mangle ordinary words
MIN_SECRET_LENGTH = 6
REPLACEMENT = "***"
#: what a scrubbed answer passes on as it is
_PLAIN = frozenset({int, float, bool, type(None)})


def _redact(text: str) -> str:
    from airflow.providers.common.compat.sdk import redact

    return str(redact(text))


def _underlying(exc: BaseException) -> BaseException:
    return exc.__cause__ if exc.__cause__ is not None and type(exc).__module__.startswith("airflow_provider_eh") else exc


def reason_of(exc: BaseException) -> str:
    """What an error's class says about a failed read, without its text."""
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError, ServiceRequestError
    from azure.eventhub.exceptions import AuthenticationError, ConnectError, OperationTimeoutError

    cause = _underlying(exc)  # the package's wrappers: judge the SDK error underneath
    if isinstance(cause, ResourceNotFoundError):
        return "not found"
    if isinstance(cause, (ClientAuthenticationError, AuthenticationError)) or (
        isinstance(cause, HttpResponseError) and cause.status_code in (401, 403)
    ):
        return "the credentials were refused"
    if isinstance(cause, (ServiceRequestError, ConnectError, OperationTimeoutError, ConnectionError, TimeoutError)):
        return "the service did not answer"
    return "the read failed"


def log_failure(what: str, exc: BaseException) -> None:
    """Log a failed read for the API server's operators: the error's class and the first line of its text,
    masked (storage errors go on with the request's signature and the string it signed)."""
    cause = _underlying(exc)
    first_line = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    log.warning("Event Hubs view: %s failed: %s: %s", what, type(cause).__name__, _redact(first_line))


def failure(what: str, exc: BaseException, hint: str, status_code: int = 502) -> ViewReadError:
    """A :class:`ViewReadError` for ``exc`` raised while doing ``what``; the raw text is logged (masked), not returned."""
    log_failure(what, exc)
    text = f"{what}: {reason_of(exc)} ({type(_underlying(exc)).__name__})."
    if hint:
        text += f" {hint}"
    return ViewReadError(f"{text} The API server's log has the details.", status_code)


def connection_secrets(conn: Any) -> set[str]:
    """The secret strings of an Airflow connection: password, secret extras, and the keys inside connection strings."""
    found = {conn.password} if getattr(conn, "password", None) else set()
    extras = getattr(conn, "extra_dejson", None) or {}
    for name, value in extras.items():
        if not isinstance(value, str) or not value:
            continue
        if any(part in name.lower() for part in SECRET_FIELD_PARTS):
            found.add(value)
        for segment in value.split(";") if ";" in value else ():
            key, sep, part = segment.partition("=")
            if not sep:
                found.add(segment.strip())  # a key pasted without its name
            elif key.strip().lower() in SECRET_SEGMENTS:
                found.add(part.strip())
    return {s for s in found if s and len(s) >= MIN_SECRET_LENGTH}


def scrub(value: Any, secrets: Iterable[str] = ()) -> Any:
    """``value`` (JSON-like) with every string redacted by Airflow's masker and cleared of ``secrets``."""
    ordered = sorted(set(secrets), key=len, reverse=True)  # a secret containing another goes first
    cleaned: dict[str, str] = {}  # an answer repeats its strings (a chart's times, keys): each is cleaned once

    def clean(item: Any) -> Any:
        kind = type(item)
        if kind in _PLAIN:
            return item
        if isinstance(item, str):
            text = cleaned.get(item)
            if text is None:
                text = _redact(item)
                for secret in ordered:
                    if secret in text:
                        text = text.replace(secret, REPLACEMENT)
                cleaned[item] = text
            return text
        if isinstance(item, dict):
            return {clean(k) if isinstance(k, str) else k: clean(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):  # numbers stay as they are without a call each (a chart has many)
            return [v if type(v) in _PLAIN else clean(v) for v in item]
        return item

    return clean(value)
