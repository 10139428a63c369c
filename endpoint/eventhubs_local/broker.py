"""The broker: ingest into partition logs (group commit, faults, idempotent producers), consumers, stats.

Broker layer: it knows hubs, partitions, events and owner levels, nothing of frames or sessions.
The AMQP layer (``connection``, ``dispatch``, ``attach``, ``links``) calls it with parsed addresses
and delivery payloads; it answers through the small interfaces below, which that layer's links and
connections provide (``Producer.accept``/``reject``, ``Consumer.steal``, ``Client.abort``,
``Client.entity_deleted``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from typing import Any, Protocol

from . import idempotence
from .auth import SasValidator
from .codec import CodecError
from .consumers import Receivers
from .entities import Refused
from .events import BATCH_FORMAT, ParsedEvent, batch_parts, parse_event
from .faults import Faults
from .log import PartitionLog
from .management import Management
from .store import Hub, Store

_LOG = logging.getLogger("eventhubs_local")
MAX_MESSAGE_SIZE = 1024 * 1024
FSYNC_POLICIES = ("always", "batch", "never")


class Client(Protocol):
    """A client connection as the broker sees it."""

    id: int
    authorized_hubs: dict[str, frozenset[str]]  # hub (lower case) -> the rights its token on $cbs grants

    @property
    def link_count(self) -> int: ...

    def abort(self) -> None: ...

    def entity_deleted(self, hub: Hub, group: str | None) -> int:
        """Detach this client's links on ``hub`` (``group``: only its receivers of that consumer group)
        with ``amqp:not-found``; how many were detached."""
        ...


class Producer(Protocol):
    """A producer (a client sender) on a hub or one of its partitions."""

    hub: Hub
    partition: int | None
    producer_group: idempotence.ProducerGroup | None
    producer_epoch: int

    @property
    def client(self) -> Client: ...

    def accept(self, delivery_id: int) -> None: ...

    def reject(self, delivery_id: int, condition: str, description: str) -> None: ...


class _Rejected(Exception):
    """A delivery the broker refuses, with the error condition its disposition carries."""

    def __init__(self, condition: str, description: str):
        super().__init__(description)
        self.condition = condition
        self.description = description


def _events_of(delivery_id: int, message_format: int, payload: Any) -> tuple[list[ParsedEvent], bytes | None]:
    """``(events, partition key)`` of a delivery: an SDK batch's events, or the one event it is."""
    try:
        if message_format == BATCH_FORMAT:
            inner, partition_key = batch_parts(payload)
            return [parse_event(m) for m in inner], partition_key
        event = parse_event(payload)
        return [event], event.partition_key
    except CodecError as exc:
        raise _Rejected("amqp:decode-error", f"malformed event in delivery {delivery_id}: {exc}") from None


class Broker:
    """Everything shared by the connections of one server."""

    def __init__(self, store: Store, *, fsync: str = "batch", validator: SasValidator | None = None,
                 retention_seconds: float | None = None, retention_bytes: int | None = None,
                 idempotent_producers: bool = True):
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync policy {fsync!r} is not one of {FSYNC_POLICIES}")
        self.store = store
        self.fsync = fsync
        self.validator = validator
        self.idempotent_producers = idempotent_producers  # off: the capability is not offered (ordinary links)
        self.retention_seconds = retention_seconds
        self.retention_bytes = retention_bytes
        self.faults = Faults()
        self.management = Management(store, validator)
        self.receivers = Receivers()
        self.clients: set[Client] = set()
        self.producers: dict[tuple[str, int], idempotence.PartitionProducers] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.started = time.time()
        self._pending_sync: set[PartitionLog] = set()
        self._pending_acks: list[tuple[Producer, int]] = []
        self._commit_scheduled = False
        self.next_client_id = 1
        self.stats_received = 0
        self.stats_delivered = 0
        self.stats_connections_total = 0
        self.stats_websocket_connections_total = 0  # of which AMQP over WebSockets

    # -- producers -------------------------------------------------------------------------------

    def join_producer_group(self, hub: Hub, partition: int | None, address: str,
                            requested: tuple[int | None, int | None, int | None]) -> idempotence.Attached:
        """Join an idempotent sender to its producer group (refused below the group's owner level)."""
        if partition is None:
            raise Refused("amqp:not-allowed", "an idempotent producer must send to one partition "
                                              f"(<hub>/Partitions/<id>), not to {address!r}")
        key = (hub.name.lower(), partition)
        producers = self.producers.get(key)
        if producers is None:
            producers = self.producers[key] = idempotence.PartitionProducers(hub.partitions[partition])
        try:
            return producers.attach(*requested)
        except idempotence.Fenced as exc:
            raise Refused(idempotence.EPOCH_STOLEN, str(exc)) from None

    def ingest(self, link: Producer, delivery_id: int, message_format: int, payload: Any, settled: bool) -> None:
        """Store one delivery (an event or an SDK batch) and acknowledge it as the fsync policy says."""
        hub = link.hub
        try:
            self._admit(hub, delivery_id, len(payload))
            events, partition_key = _events_of(delivery_id, message_format, payload)
            events = self._new_of_producer(link, delivery_id, events)
        except _Rejected as rejected:
            if not settled:
                link.reject(delivery_id, rejected.condition, rejected.description)
            return
        if not events:
            if not settled:
                link.accept(delivery_id)
            return
        index = link.partition if link.partition is not None else hub.place(partition_key)
        log = hub.partitions[index]
        log.append([functools.partial(ev.stored, partition_key=partition_key) for ev in events])
        self.stats_received += len(events)
        if settled:
            return
        if self.faults.active and self._ack_faulted(link, delivery_id, log):
            return
        self._acknowledge(link, delivery_id, log)

    def _admit(self, hub: Hub, delivery_id: int, size: int) -> None:
        """Refuse a delivery over the size limit, or one an injected ``server_busy`` fault throttles."""
        if size > MAX_MESSAGE_SIZE:
            raise _Rejected("amqp:link:message-size-exceeded",
                            f"The received message (delivery-id:{delivery_id}, size:{size} bytes) exceeds "
                            f"the limit ({MAX_MESSAGE_SIZE} bytes) currently allowed on the link.")
        if self.faults.active:
            busy = self.faults.find("server_busy", hub.name)
            if busy is not None:
                busy.triggered += 1
                raise _Rejected("com.microsoft:server-busy",
                                f"The request was terminated because the entity '{hub.name}' is being throttled "
                                "(injected fault server_busy). Please wait 4 seconds and try again.")

    def _new_of_producer(self, link: Producer, delivery_id: int, events: list[ParsedEvent]) -> list[ParsedEvent]:
        """An idempotent producer's events that are new (its duplicates are acknowledged, not stored again);
        a fenced epoch or a gap in its sequence numbers refuses the delivery. Any other producer's are all new."""
        group = link.producer_group
        if group is None or not events:
            return events
        try:
            keep = self.producers[(link.hub.name.lower(), link.partition)].admit(  # type: ignore[index]
                group, link.producer_epoch, [idempotence.event_annotations(e) for e in events])
        except idempotence.Fenced as exc:
            raise _Rejected(idempotence.EPOCH_STOLEN, str(exc)) from None
        except idempotence.OutOfOrder as exc:
            raise _Rejected(idempotence.OUT_OF_ORDER, str(exc)) from None
        except CodecError as exc:
            raise _Rejected("amqp:decode-error", f"delivery {delivery_id}: {exc}") from None
        return [e for e, k in zip(events, keep, strict=True) if k]

    def _acknowledge(self, link: Producer, delivery_id: int, log: PartitionLog) -> None:
        """Accept a stored delivery as the fsync policy says: after its fsync, with the loop pass's group commit,
        or at once."""
        if self.fsync == "always":
            log.sync()
            link.accept(delivery_id)
        elif self.fsync == "batch":
            self._pending_sync.add(log)
            self._pending_acks.append((link, delivery_id))
            if not self._commit_scheduled:
                self._commit_scheduled = True
                assert self.loop is not None
                self.loop.call_soon(self._commit)
        else:
            link.accept(delivery_id)

    def _ack_faulted(self, link: Producer, delivery_id: int, log: PartitionLog) -> bool:
        """Apply an injected fault to the acknowledgement of a stored delivery; True if one took it."""
        faults, hub = self.faults, link.hub
        drop = faults.find("drop_after", hub.name)
        if drop is not None:
            drop.remaining -= 1
            if drop.remaining <= 0:
                drop.triggered += 1
                faults.active.remove(drop)
                _LOG.info("conn %s: fault drop_after: dropping the connection after delivery %s", link.client.id,
                          delivery_id)
                if self.fsync != "never":
                    log.sync()
                link.client.abort()
                return True
        no_ack = faults.find("store_no_ack", hub.name)
        if no_ack is not None:
            no_ack.triggered += 1
            return True
        delay = faults.find("delay_ack", hub.name)
        if delay is not None:
            delay.triggered += 1
            assert self.loop is not None
            self.loop.call_later(float(delay.params["ms"]) / 1000, self._ack_later, link, delivery_id, log)
            return True
        return False

    def _ack_later(self, link: Producer, delivery_id: int, log: PartitionLog) -> None:
        if self.fsync != "never":
            log.sync()
        link.accept(delivery_id)

    def _commit(self) -> None:
        """Group commit: one fsync per dirty partition, then every acknowledgement waiting for it."""
        self._commit_scheduled = False
        pending, self._pending_sync = self._pending_sync, set()
        acks, self._pending_acks = self._pending_acks, []
        for log in pending:
            try:
                log.sync()
            except OSError:
                _LOG.exception("fsync of %s failed; acknowledgements withheld", log.directory)
                return
        for link, delivery_id in acks:
            link.accept(delivery_id)

    # -- entities ---------------------------------------------------------------------------------

    def delete_hub(self, name: str) -> Hub:
        """Delete a hub as the service does while clients use it: every sender and receiver on it is
        detached with ``amqp:not-found``, then its events, producer groups and scoped faults go."""
        hub = self.store.get(name)
        if hub is None:
            return self.store.delete_hub(name)  # the store's 404
        detached = sum(client.entity_deleted(hub, None) for client in list(self.clients))
        self._pending_sync.difference_update(hub.partitions)
        self.producers = {key: group for key, group in self.producers.items() if key[0] != hub.name.lower()}
        self.faults.forget_hub(hub.name)
        self.store.delete_hub(hub.name)
        _LOG.info("hub %s deleted: %d links detached", hub.name, detached)
        return hub

    def delete_consumer_group(self, hub_name: str, group: str) -> Hub:
        """Delete a consumer group: its receivers are detached with ``amqp:not-found``."""
        hub = self.store.delete_consumer_group(hub_name, group)
        detached = sum(client.entity_deleted(hub, group) for client in list(self.clients))
        _LOG.info("consumer group %s of hub %s deleted: %d links detached", group, hub.name, detached)
        return hub

    # -- maintenance ------------------------------------------------------------------------------

    def apply_retention(self) -> int:
        if self.retention_seconds is None and self.retention_bytes is None:
            return 0
        dropped = 0
        for log in self.store.partitions():
            dropped += log.trim(self.retention_seconds, self.retention_bytes)
        return dropped

    def sync_all(self) -> None:
        """Flush every partition (unless fsync is off): at shutdown."""
        for log in self.store.partitions():
            if self.fsync != "never":
                log.sync()

    def stats(self) -> dict[str, Any]:
        cpu = os.times()
        return {
            "events_stored": sum(p.next_seq - p.begin_seq for p in self.store.partitions()),
            "events_received": self.stats_received,
            "transfers_delivered": self.stats_delivered,
            "connections": len(self.clients),
            "connections_total": self.stats_connections_total,
            "websocket_connections_total": self.stats_websocket_connections_total,
            "links": sum(c.link_count for c in self.clients),
            "receivers": self.receivers.describe(),
            "hubs": len(self.store.hubs),
            "faults": self.faults.describe(),
            "cpu_user_s": cpu.user,
            "cpu_system_s": cpu.system,
            "pid": os.getpid(),
            "uptime_s": time.time() - self.started,
            "fsync": self.fsync,
        }
