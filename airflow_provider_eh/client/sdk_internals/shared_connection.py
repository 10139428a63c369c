"""One AMQP connection per hub: the pyamqp connection's state, transport and management requests.

Part of the adapter :mod:`airflow_provider_eh.client.sdk_internals`: the rest of the package calls these
names from there, never from this module.
"""

from __future__ import annotations

import time
from typing import Any

# ---- one AMQP connection per hub (connection.py) ------------------------------------------------


def connection_usable(connection: Any) -> bool:
    """Whether a pyamqp connection can take more sessions (private: its states and error)."""
    from azure.eventhub._pyamqp._connection import _CLOSING_STATES
    from azure.eventhub._pyamqp.constants import ConnectionState

    return (getattr(connection, "_error", None) is None
            and connection.state not in (*_CLOSING_STATES, ConnectionState.CLOSE_RCVD))


def connection_transport(connection: Any) -> Any:
    """The connection's transport (private), whose socket a reader waits on."""
    return connection._transport


def transport_buffered(transport: Any) -> bool:
    """Whether the transport holds read bytes not handled yet (private: its read buffer)."""
    buffered = getattr(transport, "_read_buffer", None)
    return buffered is not None and len(buffered.getvalue()) > buffered.tell()


def idle_read(connection: Any) -> None:
    """What the SDK's read does when nothing arrived: raise the connection's error, else send the heartbeat due.

    Private: ``_get_remote_timeout`` is the SDK's heartbeat check, done by its ``listen`` on a timeout.
    """
    if connection._error:
        raise connection._error
    connection._get_remote_timeout(time.time())


def shareable(handler: Any) -> bool:
    """Whether ``handler`` (opened) and its connection are the SDK's pyamqp ones a shared connection builds on."""
    connection = getattr(handler, "_connection", None)
    return (hasattr(handler, "_external_connection") and callable(getattr(connection, "listen", None))
            and callable(getattr(connection, "_get_remote_timeout", None)) and hasattr(connection, "_error")
            and hasattr(getattr(connection, "_transport", None), "sock"))


def share_handler_connection(handler: Any) -> Any:
    """The connection ``handler`` opened, marked so that the handler's close ends its session only.

    Private: ``_external_connection`` is how the SDK tells a handler the connection is not its own.
    """
    handler._external_connection = True
    return handler._connection


def create_management_client(owner: Any) -> tuple[Any, Any]:
    """``(client, auth)``: an unopened management client with ``owner``'s settings (private: the SDK's own factory)."""
    auth = owner._create_auth()
    return owner._amqp_transport.create_mgmt_client(owner._address, mgmt_auth=auth, config=owner._config), auth


def management_request(owner: Any, client: Any, auth: Any, message: Any, operation_type: bytes) -> Any:
    """The response of one management request over an open management ``client``, as the SDK's own request.

    Private: the SDK's status fields and read operation, and its transport's request and error mapping.
    """
    from azure.eventhub._constants import MGMT_STATUS_CODE, MGMT_STATUS_DESC, READ_OPERATION

    transport = owner._amqp_transport
    message.application_properties["security_token"] = transport.get_updated_token(auth)
    status, description, response = transport.mgmt_client_request(
        client, message, operation=READ_OPERATION, operation_type=operation_type,
        status_code_field=MGMT_STATUS_CODE, description_fields=MGMT_STATUS_DESC,
    )
    status = int(status)
    if isinstance(description, bytes):
        description = description.decode("utf-8")
    if status < 400:
        return response
    raise transport.get_error(status, description)
