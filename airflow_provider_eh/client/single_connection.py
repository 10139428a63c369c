"""Producer and consumer clients without the Python SDK's per-handler connections and poll sleeps.

The SDK's ``EventHubProducerClient`` opens a new AMQP connection for every management request (the
partition ids, each partition's properties) and one for the largest message size a batch may take
(a link to no partition, opened only to read that size), and it waits for every handler it opens in
steps of 50 ms although the readiness check itself blocks on the socket. Against a real namespace
each connection also pays TLS and a token. A publish reads the partition's end before its intent
and after its send, and checks the hub's partitions: six connections, each with its set-up, for a
batch that is sent in milliseconds (the figures: ``bench/README.md``, "Design figures").

:class:`SingleConnectionProducerClient` is the SDK's client with four changes, all on the SDK's own
(non-public) building blocks, touched in :mod:`~airflow_provider_eh.client.sdk_internals`, each
falling back to the SDK's way when they are not the ones this builds on:

* its handlers open on the hub's one shared connection of the process
  (:class:`~airflow_provider_eh.client.connection.SharedConnection`) when given one, as every client
  :meth:`~airflow_provider_eh.client.endpoint.EventHubsEndpoint.producer` builds is;
* management requests go over one kept management link (:class:`KeptManagement`, the shared
  connection's own), opened on the first request and shared, under a lock, by every client of the
  hub; a request that fails closes it and is made again the SDK's way;
* a batch for a partition takes its size limit from that partition's sender link when it is open
  already (the engine opens it first, to fence it) instead of opening a link to no partition;
* handlers open without sleeping between readiness checks (each check waits on the socket).

:class:`SingleConnectionConsumerClient` is the SDK's consumer client whose receivers open on the shared
connection (the publishing engine's read-back uses it).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

from airflow_provider_eh.client.connection import KeptManagement, SharedConnection, acquire, release
from airflow_provider_eh.client.sdk_internals import HookedConsumerClient, HookedProducerClient

__all__ = ["KeptManagement", "SingleConnectionConsumerClient", "SingleConnectionProducerClient"]

log = logging.getLogger(__name__)


class _Shares:
    """A client's hold on its hub's shared connection: taken when built, given back once when closed."""

    shared_connection: SharedConnection | None = None
    _share_key: Hashable | None = None

    def _take_share(self, key: Hashable | None) -> None:
        self._share_key = key
        self.shared_connection = acquire(key) if key is not None else None

    def _give_back_share(self) -> None:
        shared, self.shared_connection = self.shared_connection, None
        if shared is not None:
            release(self._share_key, shared)


class SingleConnectionProducerClient(_Shares, HookedProducerClient):
    """``EventHubProducerClient`` on a shared connection, with kept management, per-partition batch limits
    and sleepless opens (the SDK's private hooks are :class:`~airflow_provider_eh.client.sdk_internals.HookedProducerClient`'s).

    :param share: the key of the process's shared connection to open handlers on (the endpoint), whose
        kept management link it uses; ``None``: a connection per handler, as the SDK does, and a
        management link of its own, closed with it.
    """

    def __init__(self, *args: Any, share: Hashable | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._take_share(share)
        self._owns_kept = self.shared_connection is None
        self._kept = KeptManagement() if self.shared_connection is None else self.shared_connection.management

    def management_request(self, message: Any, operation_type: bytes) -> Any:
        try:
            return self._kept.request(self, message, operation_type)
        except ImportError:
            raise
        except Exception as exc:  # the kept link broke, or the SDK's internals differ: the SDK's own way, with its retries
            log.debug("management request over the kept link failed (%s: %s); the SDK's way", type(exc).__name__, exc)
            return self.sdk_management_request(message, operation_type)

    def create_batch(self, **kwargs: Any) -> Any:
        partition_id = kwargs.get("partition_id")
        if partition_id is not None:
            # only from a link already open (the engine opens the partition's sender first, to fence it):
            # opening one here, before the send, would change how the SDK retries that send (a link open
            # before a send is re-sent on once when its acknowledgement times out)
            self.adopt_link_size(str(partition_id))
        return super().create_batch(**kwargs)

    def close(self, **kwargs: Any) -> None:
        try:
            super().close(**kwargs)
        finally:
            if self._owns_kept:
                self._kept.close()
            self._give_back_share()


class SingleConnectionConsumerClient(_Shares, HookedConsumerClient):
    """``EventHubConsumerClient`` whose receivers open on the process's shared connection of ``share``."""

    def __init__(self, *args: Any, share: Hashable | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._take_share(share)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._give_back_share()
