"""Producer and consumer clients without the Python SDK's per-handler connections and poll sleeps.

The SDK's ``EventHubProducerClient`` opens a new AMQP connection for every management request (the
partition ids, each partition's properties) and one for the largest message size a batch may take
(a link to no partition, opened only to read that size), and it waits for every handler it opens in
steps of 50 ms although the readiness check itself blocks on the socket. Against a real namespace
each connection also pays TLS and a token. A publish reads the partition's end before its intent
and after its send, and checks the hub's partitions: six connections and about 2.5 s of set-up for
a batch that is sent in milliseconds.

:class:`LeanProducerClient` is the SDK's client with four changes, all on the SDK's own
(non-public) building blocks, each falling back to the SDK's way when they are not the ones this
builds on:

* its handlers open on the hub's one shared connection of the process
  (:class:`~airflow_provider_eh.client.connection.SharedConnection`) when given one, as every client
  :meth:`~airflow_provider_eh.client.endpoint.EventHubsEndpoint.producer` builds is;
* management requests go over one kept management link (:class:`KeptManagement`, the shared
  connection's own), opened on the first request and shared, under a lock, by every client of the
  hub; a request that fails closes it and is made again the SDK's way;
* a batch for a partition takes its size limit from that partition's sender link when it is open
  already (the engine opens it first, to fence it) instead of opening a link to no partition;
* handlers open without sleeping between readiness checks (each check waits on the socket).

:class:`LeanConsumerClient` is the SDK's consumer client whose receivers open on the shared
connection (the publishing engine's read-back uses it).
"""

from __future__ import annotations

import logging
import types
from collections.abc import Hashable
from typing import Any

from azure.eventhub import EventHubConsumerClient, EventHubProducerClient

from airflow_provider_eh.client.connection import KeptManagement, SharedConnection, acquire, release

__all__ = ["KeptManagement", "LeanConsumerClient", "LeanProducerClient"]

log = logging.getLogger(__name__)


def _open_handler(self: Any, auth: Any) -> None:
    """Create the handler of an SDK producer or consumer and open it: on the client's shared connection when it has one."""
    self._create_handler(auth)
    shared: SharedConnection | None = getattr(self._client, "_shared", None)
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


class _Shares:
    """A client's hold on its hub's shared connection: taken when built, given back once when closed."""

    _shared: SharedConnection | None = None
    _share_key: Hashable | None = None

    def _take_share(self, key: Hashable | None) -> None:
        self._share_key = key
        self._shared = acquire(key) if key is not None else None

    def _give_back_share(self) -> None:
        shared, self._shared = self._shared, None
        if shared is not None:
            release(self._share_key, shared)


class LeanProducerClient(_Shares, EventHubProducerClient):
    """``EventHubProducerClient`` on a shared connection, with kept management, per-partition batch limits
    and sleepless opens.

    :param share: the key of the process's shared connection to open handlers on (the endpoint), whose
        kept management link it uses; ``None``: a connection per handler, as the SDK does, and a
        management link of its own, closed with it.
    """

    def __init__(self, *args: Any, share: Hashable | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._take_share(share)
        self._owns_kept = self._shared is None
        self._kept = KeptManagement() if self._shared is None else self._shared.management

    def _management_request(self, mgmt_msg: Any, op_type: bytes) -> Any:
        try:
            return self._kept.request(self, mgmt_msg, op_type)
        except ImportError:
            raise
        except Exception as exc:  # the kept link broke, or the SDK's internals differ: the SDK's own way, with its retries
            log.debug("management request over the kept link failed (%s: %s); the SDK's way", type(exc).__name__, exc)
            return super()._management_request(mgmt_msg, op_type)

    def _create_producer(self, partition_id: str | None = None, send_timeout: float | None = None) -> Any:
        producer = super()._create_producer(partition_id=partition_id, send_timeout=send_timeout)
        if callable(getattr(producer, "_open", None)) and hasattr(producer, "_create_handler"):
            setattr(producer, "_open", types.MethodType(_lean_open, producer))  # noqa: B010 (a method of the SDK's, replaced)
        return producer

    def create_batch(self, **kwargs: Any) -> Any:
        partition_id = kwargs.get("partition_id")
        if not self._max_message_size_on_link and partition_id is not None:
            # only from a link already open (the engine opens the partition's sender first, to fence it):
            # opening one here, before the send, would change how the SDK retries that send (a link open
            # before a send is re-sent on once when its acknowledgement times out)
            producer = (getattr(self, "_producers", None) or {}).get(str(partition_id))
            size = getattr(producer, "_max_message_size_on_link", None) if getattr(producer, "running", False) else None
            if size:
                self._max_message_size_on_link = size
        return super().create_batch(**kwargs)

    def close(self, **kwargs: Any) -> None:
        try:
            super().close(**kwargs)
        finally:
            if self._owns_kept:
                self._kept.close()
            self._give_back_share()


class LeanConsumerClient(_Shares, EventHubConsumerClient):
    """``EventHubConsumerClient`` whose receivers open on the process's shared connection of ``share``."""

    def __init__(self, *args: Any, share: Hashable | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._take_share(share)

    def _create_consumer(self, *args: Any, **kwargs: Any) -> Any:
        consumer = super()._create_consumer(*args, **kwargs)
        if callable(getattr(consumer, "_open", None)) and hasattr(consumer, "_create_handler"):
            setattr(consumer, "_open", types.MethodType(_lean_consumer_open, consumer))  # noqa: B010 (a method of the SDK's, replaced)
        return consumer

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._give_back_share()
