"""A producer client without the Python SDK's per-request connections and poll sleeps.

The SDK's ``EventHubProducerClient`` opens a new AMQP connection for every management request (the
partition ids, each partition's properties) and one for the largest message size a batch may take
(a link to no partition, opened only to read that size), and it waits for every handler it opens in
steps of 50 ms although the readiness check itself blocks on the socket. Against a real namespace
each connection also pays TLS and a token. A publish reads the partition's end before its intent
and after its send, and checks the hub's partitions: six connections and about 2.5 s of set-up for
a batch that is sent in milliseconds.

:class:`LeanProducerClient` is the SDK's client with three changes, all on the SDK's own
(non-public) building blocks, each falling back to the SDK's way when they are not the ones this
builds on:

* management requests go over one kept management link (:class:`KeptManagement`), opened on the
  first request and shared, under a lock, by every client given the same one (a publish shares one
  between its partitions' threads); a request that fails closes it and is made again the SDK's way;
* a batch for a partition takes its size limit from that partition's sender link when it is open
  already (the engine opens it first, to fence it) instead of opening a link to no partition;
* handlers open without sleeping between readiness checks (each check waits on the socket).
"""

from __future__ import annotations

import logging
import threading
import types
from typing import Any

from azure.eventhub import EventHubProducerClient

log = logging.getLogger(__name__)


class KeptManagement:
    """One management link of a hub, opened on first use and kept until :meth:`close`; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._client: Any = None
        self._auth: Any = None
        self.opened = 0  # links opened so far (a link that broke is opened again)

    def request(self, owner: EventHubProducerClient, message: Any, operation_type: bytes) -> Any:
        """The response of one management request through the kept link (opened from ``owner``'s settings)."""
        from azure.eventhub._constants import MGMT_STATUS_CODE, MGMT_STATUS_DESC, READ_OPERATION

        transport = owner._amqp_transport
        with self._lock:
            if self._client is None:
                auth = owner._create_auth()
                client = transport.create_mgmt_client(owner._address, mgmt_auth=auth, config=owner._config)
                try:
                    client.open()
                    while not client.client_ready():  # each check waits on the socket: no sleep needed
                        pass
                except BaseException:
                    client.close()
                    raise
                self._client, self._auth = client, auth
                self.opened += 1
            message.application_properties["security_token"] = transport.get_updated_token(self._auth)
            try:
                status, description, response = transport.mgmt_client_request(
                    self._client, message, operation=READ_OPERATION, operation_type=operation_type,
                    status_code_field=MGMT_STATUS_CODE, description_fields=MGMT_STATUS_DESC,
                )
            except BaseException:
                self._close()
                raise
        status = int(status)
        if isinstance(description, bytes):
            description = description.decode("utf-8")
        if status < 400:
            return response
        raise transport.get_error(status, description)

    def _close(self) -> None:
        client, self._client, self._auth = self._client, None, None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # closing a broken link: nothing to keep
                log.debug("closing the kept management link: %s", exc)

    def close(self) -> None:
        with self._lock:
            self._close()


def _lean_open(self: Any) -> bool:
    """The SDK's handler open (``ConsumerProducerMixin._open``) without the 50 ms sleeps between readiness checks."""
    if self.running:
        return False
    if self._handler:
        self._handler.close()
    auth = self._client._create_auth(auth_uri=self._client._auth_uri)
    self._create_handler(auth)
    connection = self._client._conn_manager.get_connection(endpoint=self._client._address.hostname, auth=auth)
    self._handler.open(connection=connection)
    while not self._handler.client_ready():  # each check waits on the socket
        pass
    self._max_message_size_on_link = (self._amqp_transport.get_remote_max_message_size(self._handler)
                                      or self._amqp_transport.MAX_MESSAGE_LENGTH_BYTES)
    self.running = True
    return True


class LeanProducerClient(EventHubProducerClient):
    """``EventHubProducerClient`` with kept management, per-partition batch limits and sleepless opens.

    :param management: the kept management link to share (a publish shares one across its threads);
        ``None``: a link of this client's own, closed with it.
    """

    def __init__(self, *args: Any, management: KeptManagement | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._kept = management if management is not None else KeptManagement()
        self._owns_kept = management is None

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
