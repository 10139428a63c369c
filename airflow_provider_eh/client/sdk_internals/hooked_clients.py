"""Producer and consumer clients whose handlers open on the shared connection, without the SDK's sleeps.

Part of the adapter :mod:`airflow_provider_eh.client.sdk_internals`: the rest of the package calls these
names from there, never from this module.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from azure.eventhub import EventHubConsumerClient, EventHubProducerClient

# ---- producer and consumer clients on the shared connection (single_connection.py) ---------------------------


def _open_handler(self: Any, auth: Any) -> None:
    """Create the handler of an SDK producer or consumer and open it: on the client's shared connection when it has one."""
    self._create_handler(auth)
    shared = getattr(self._client, "shared_connection", None)
    if shared is not None:
        shared.open(self._handler)
        return
    connection = self._client._conn_manager.get_connection(endpoint=self._client._address.hostname, auth=auth)
    self._handler.open(connection=connection)


def _lean_open(self: Any) -> bool:
    """The SDK's handler open (``ConsumerProducerMixin._open``) without the 50 ms sleeps between readiness checks."""
    if self.running:
        return False
    if self._handler:
        self._handler.close()
    _open_handler(self, self._client._create_auth(auth_uri=self._client._auth_uri))
    while not self._handler.client_ready():  # each check waits on the socket
        pass
    self._max_message_size_on_link = (self._amqp_transport.get_remote_max_message_size(self._handler)
                                      or self._amqp_transport.MAX_MESSAGE_LENGTH_BYTES)
    self.running = True
    return True


def _lean_consumer_open(self: Any) -> bool:
    """The SDK's receiver open (``EventHubConsumer._open``), on the client's shared connection."""
    if not self.running:
        if self._handler:
            self._handler.close()
        _open_handler(self, self._client._create_auth(auth_uri=self._client._auth_uri))
        self.handler_ready = False
        self.running = True
    if not self.handler_ready and self._handler.client_ready():
        self.handler_ready = True
    return bool(self.handler_ready)


def _replace_open(handler_owner: Any, lean: Callable[[Any], bool]) -> None:
    if callable(getattr(handler_owner, "_open", None)) and hasattr(handler_owner, "_create_handler"):
        setattr(handler_owner, "_open", types.MethodType(lean, handler_owner))  # noqa: B010 (a method of the SDK's, replaced)


class HookedProducerClient(EventHubProducerClient):
    """
    ``EventHubProducerClient`` whose private extension points are named hooks of its subclasses.

    Its producers open on ``self.shared_connection`` (a
    :class:`~airflow_provider_eh.client.connection.SharedConnection`, ``None``: a connection each, as the
    SDK does) without the SDK's 50 ms sleeps; its management requests go to :meth:`management_request`.
    """

    shared_connection: Any = None

    def _management_request(self, mgmt_msg: Any, op_type: bytes) -> Any:  # private: every management request
        return self.management_request(mgmt_msg, op_type)

    def management_request(self, message: Any, operation_type: bytes) -> Any:
        """One management request; the SDK's own way (a new connection each, with its retries) unless overridden."""
        return self.sdk_management_request(message, operation_type)

    def sdk_management_request(self, message: Any, operation_type: bytes) -> Any:
        """The SDK's own management request."""
        return super()._management_request(message, operation_type)

    def _create_producer(self, partition_id: str | None = None, send_timeout: float | None = None) -> Any:
        producer = super()._create_producer(partition_id=partition_id, send_timeout=send_timeout)  # private: opens lean
        _replace_open(producer, _lean_open)
        return producer

    def adopt_link_size(self, partition_id: str) -> None:
        """Take the batch size limit from ``partition_id``'s sender link when it is open already.

        Private: the SDK opens a link to no partition only to read that size (``_max_message_size_on_link``).
        """
        if not self._max_message_size_on_link:
            producer = (getattr(self, "_producers", None) or {}).get(str(partition_id))
            size = getattr(producer, "_max_message_size_on_link", None) if getattr(producer, "running", False) else None
            if size:
                self._max_message_size_on_link = size


class HookedConsumerClient(EventHubConsumerClient):
    """``EventHubConsumerClient`` whose receivers open on ``self.shared_connection`` (see :class:`HookedProducerClient`)."""

    shared_connection: Any = None

    def _create_consumer(self, *args: Any, **kwargs: Any) -> Any:  # private: the processor's receiver factory
        consumer = super()._create_consumer(*args, **kwargs)
        _replace_open(consumer, _lean_consumer_open)
        return consumer
