"""The error map reads an error's class by type, through the SDK adapter (``client/sdk_internals/errors.py``).

A class of another library that only shares a name with an SDK's (a ``ClientError`` that is not aiohttp's, an
``AuthenticationError`` of our own) is no service failure and no refused credential; a subclass the SDK adds
later is read as its base; a reported error, which crosses processes as its class's name, is read by the
classes of that name.
"""

from __future__ import annotations

import aiohttp
import pytest
from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError, ServiceResponseTimeoutError
from azure.eventhub._pyamqp.error import AMQPConnectionError, ErrorCondition, TokenAuthFailure, TokenExpired
from azure.eventhub.exceptions import AuthenticationError, ClientClosedError, ConnectError, EventHubError
from websocket import WebSocketBadStatusException

from airflow_provider_eh.client.failures import FailureSite, is_storage_error, provider_error, retry_can_help
from airflow_provider_eh.client.sdk_internals import ErrorKind, amqp_condition, error_kinds, kinds_named
from airflow_provider_eh.errors import CredentialRefusedError

SITE = FailureSite(conn_id="eh_orders", hub="orders", address="ns.example:5671")


class ClientError(Exception):
    """Not aiohttp's: a name only."""


class AuthenticationErrorOfOurs(Exception):
    pass


AuthenticationErrorOfOurs.__name__ = "AuthenticationError"


def test_a_class_that_only_shares_a_name_with_an_sdks_is_not_read_as_one() -> None:
    assert error_kinds(ClientError("boom")) == frozenset()
    assert provider_error(ClientError("boom"), SITE) is None
    wrapped = EventHubError("failed", AuthenticationErrorOfOurs("no"))  # type: ignore[arg-type]
    mapped = provider_error(wrapped, SITE)
    assert mapped is not None and not isinstance(mapped, CredentialRefusedError) and mapped.retryable


def test_each_sdk_class_has_its_kinds_and_a_subclass_those_of_its_bases() -> None:
    assert {ErrorKind.SERVICE, ErrorKind.EVENT_HUBS, ErrorKind.CREDENTIAL} <= error_kinds(AuthenticationError("x"))
    assert {ErrorKind.CREDENTIAL, ErrorKind.TOKEN_EXPIRED} <= error_kinds(TokenExpired(ErrorCondition.UnauthorizedAccess))
    assert ErrorKind.CREDENTIAL in error_kinds(TokenAuthFailure(401, "refused"))
    assert {ErrorKind.AZURE_CORE, ErrorKind.NOT_FOUND} <= error_kinds(ResourceNotFoundError("gone"))
    assert ErrorKind.TIMEOUT in error_kinds(ServiceResponseTimeoutError("slow"))
    assert ErrorKind.CLIENT_STATE in error_kinds(ClientClosedError("closed"))
    assert ErrorKind.HANDSHAKE in error_kinds(WebSocketBadStatusException("Handshake status %d", 404))
    assert ErrorKind.TIMEOUT in error_kinds(aiohttp.ServerTimeoutError())

    class LaterSubclass(ConnectError):
        """A class a later SDK release might add."""

    assert ErrorKind.EVENT_HUBS in error_kinds(LaterSubclass("x")) and retry_can_help(LaterSubclass("x")) is True


def test_storage_errors_are_azure_cores_and_not_the_event_hubs_sdks() -> None:
    assert is_storage_error(ClientAuthenticationError("no")) and not is_storage_error(AuthenticationError("no"))
    assert not is_storage_error(ValueError("no"))


@pytest.mark.parametrize(("name", "kind"), [
    ("AuthenticationError", ErrorKind.CREDENTIAL),
    ("ClientAuthenticationError", ErrorKind.HTTP_CREDENTIAL),
    ("ConnectionLostError", ErrorKind.LOST),
    ("OperationTimeoutError", ErrorKind.TIMEOUT),
    ("WebSocketTimeoutException", ErrorKind.TIMEOUT),
    ("ResourceNotFoundError", ErrorKind.NOT_FOUND),
])
def test_a_reported_error_is_read_by_the_classes_of_its_name(name: str, kind: ErrorKind) -> None:
    assert kind in kinds_named([name])


def test_a_name_no_known_class_has_says_nothing() -> None:
    assert kinds_named(["NoSuchError"]) == frozenset()


def test_the_amqp_condition_is_read_from_the_amqp_error_only() -> None:
    assert amqp_condition(AMQPConnectionError(ErrorCondition.NotFound, description="gone")) == "amqp:not-found"

    class Other(Exception):
        condition = b"amqp:not-found"

    assert amqp_condition(Other()) == ""
