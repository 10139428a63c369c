"""The SDKs' error classes, by type: what each says to the error map (:mod:`airflow_provider_eh.client.failures`).

The map reads an error's chain as a set of :class:`ErrorKind`; this module is where the classes behind
each kind are known: azure-eventhub's public exceptions, azure-core's, the AMQP errors of the SDK's
own AMQP stack (``azure.eventhub._pyamqp.error``: private, and the only place that names the
``TokenExpired`` under an ``AuthenticationError``), and the transports' under them (websocket-client,
aiohttp, urllib3; each optional). An error is read with ``isinstance`` against one table; a reported
error that crossed a process as its class's name only (:func:`kinds_named`) is read by the same
table, through the classes of that name.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import socket
import ssl
from collections.abc import Iterable
from enum import Enum

import azure.core.exceptions as core
import azure.eventhub.exceptions as eventhub
from azure.eventhub._pyamqp.error import AMQPException, AuthenticationException, TokenExpired


class ErrorKind(Enum):
    """What an error's class says about a failure, in the words the map needs."""

    SERVICE = "a failure of a service or the network (an SDK's or a transport's error), not a bug or bad input"
    EVENT_HUBS = "raised by the Event Hubs SDK"
    AZURE_CORE = "raised by azure-core (blob storage, the Schema Registry)"
    CLIENT_STATE = "the client's own state or the event at fault (a closed client, an event the SDK refused)"
    CREDENTIAL = "the service refused the credential (the Event Hubs SDK's, the AMQP layer's or azure-core's words)"
    HTTP_CREDENTIAL = "an HTTP service (azure-core) refused the credential"
    TOKEN_EXPIRED = "the AMQP layer found its token expired"
    NOT_FOUND = "an HTTP service (azure-core) answered 404"
    NO_CONNECTION = "no connection was made (aiohttp), although the async client words it AuthenticationError"
    PROXY_ANSWER = "the HTTP proxy's answer to CONNECT: the error's status is the proxy's (aiohttp)"
    HANDSHAKE = "the address answered the WebSocket upgrade with another HTTP status"
    TIMEOUT = "the service did not answer in time"
    LOST = "the connection was lost"


K = ErrorKind

#: the optional transports' classes, by module and name, and their kinds
_TRANSPORTS: tuple[tuple[str, str, frozenset[ErrorKind]], ...] = (
    ("websocket", "WebSocketException", frozenset({K.SERVICE})),
    ("websocket", "WebSocketBadStatusException", frozenset({K.HANDSHAKE})),
    ("websocket", "WebSocketTimeoutException", frozenset({K.TIMEOUT})),
    ("websocket", "WebSocketConnectionClosedException", frozenset({K.LOST})),
    ("aiohttp", "ClientError", frozenset({K.SERVICE})),
    ("aiohttp", "ClientConnectorError", frozenset({K.NO_CONNECTION})),
    ("aiohttp", "ClientHttpProxyError", frozenset({K.PROXY_ANSWER})),
    ("aiohttp", "WSServerHandshakeError", frozenset({K.HANDSHAKE})),
    ("aiohttp", "ServerDisconnectedError", frozenset({K.LOST})),
    ("urllib3.exceptions", "HTTPError", frozenset({K.SERVICE})),
)


@functools.cache
def _table() -> tuple[tuple[type[BaseException], frozenset[ErrorKind]], ...]:
    """Each class the map knows and its kinds; an error has the kinds of every row it is an instance of."""
    rows: list[tuple[type[BaseException], frozenset[ErrorKind]]] = [
        (OSError, frozenset({K.SERVICE})),  # the socket's; a local file's is told apart by the map
        (TimeoutError, frozenset({K.SERVICE, K.TIMEOUT})),  # also asyncio's and aiohttp's ServerTimeoutError
        (ConnectionResetError, frozenset({K.LOST})),
        (BrokenPipeError, frozenset({K.LOST})),
        (eventhub.EventHubError, frozenset({K.SERVICE, K.EVENT_HUBS})),
        (eventhub.ClientClosedError, frozenset({K.CLIENT_STATE})),
        (eventhub.EventDataError, frozenset({K.CLIENT_STATE})),
        (eventhub.AuthenticationError, frozenset({K.CREDENTIAL})),
        (eventhub.OperationTimeoutError, frozenset({K.TIMEOUT})),
        (eventhub.ConnectionLostError, frozenset({K.LOST})),
        (AMQPException, frozenset({K.SERVICE})),
        (AuthenticationException, frozenset({K.CREDENTIAL})),  # TokenAuthFailure too
        (TokenExpired, frozenset({K.TOKEN_EXPIRED})),
        (core.AzureError, frozenset({K.SERVICE, K.AZURE_CORE})),
        (core.ClientAuthenticationError, frozenset({K.CREDENTIAL, K.HTTP_CREDENTIAL})),
        (core.ResourceNotFoundError, frozenset({K.NOT_FOUND})),
        (core.ServiceResponseTimeoutError, frozenset({K.TIMEOUT})),
        (core.ServiceResponseError, frozenset({K.LOST})),
    ]
    for module_name, name, kinds in _TRANSPORTS:
        try:
            cls = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError):  # a transport not installed (or renamed): its errors never occur
            continue
        rows.append((cls, kinds))
    return tuple(rows)


def error_kinds(exc: BaseException) -> frozenset[ErrorKind]:
    """The kinds of ``exc`` (its own class's, not those of the errors it carries)."""
    return frozenset(kind for cls, kinds in _table() if isinstance(exc, cls) for kind in kinds)


@functools.cache
def _classes_by_name() -> dict[str, tuple[type[BaseException], ...]]:
    modules: list[object] = [builtins, socket, ssl, core, eventhub, importlib.import_module("azure.eventhub._pyamqp.error")]
    for module_name in sorted({m for m, _, _ in _TRANSPORTS}):
        try:
            modules.append(importlib.import_module(module_name))
        except ImportError:
            continue
    found: dict[str, list[type[BaseException]]] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException):
                found.setdefault(value.__name__, []).append(value)
    return {name: tuple(dict.fromkeys(classes)) for name, classes in found.items()}


def kinds_named(names: Iterable[str]) -> frozenset[ErrorKind]:
    """The kinds of errors known only by their class's name (an executor's report crosses processes as text):
    those of every known class of each name."""
    classes = _classes_by_name()
    return frozenset(kind for name in names for cls in classes.get(name, ()) for row, kinds in _table()
                     if issubclass(cls, row) for kind in kinds)


def amqp_condition(exc: BaseException) -> str:
    """An AMQP error's condition as the wire spells it (``amqp:not-found``), or ``""`` for any other error."""
    condition = exc.condition if isinstance(exc, AMQPException) else None
    if condition is None:
        return ""
    value = getattr(condition, "value", condition)  # an ErrorCondition, or the symbol the peer sent
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
