"""Which hub, partition or consumer group a link address names, and whether the client may use it.

Broker layer: addresses arrive as path segments (``<hub>``, ``<hub>/Partitions/<id>``,
``<hub>/ConsumerGroups/<group>/Partitions/<id>``); a refusal is a ``Refused`` with the Event Hubs
error condition the client is answered with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .log import PartitionLog
from .store import Hub, Store


class Refused(Exception):
    """A producer or consumer the broker will not open, with the error condition to answer."""

    def __init__(self, condition: str, description: str):
        super().__init__(description)
        self.condition = condition
        self.description = description


@dataclass(frozen=True)
class ConsumerSource:
    """A consumer's place: one partition of a hub in one consumer group."""

    hub: Hub
    group: str
    partition_id: str
    log: PartitionLog


def hub_for(store: Store, name: str, authorized_hubs: Mapping[str, frozenset[str]] | None, claim: str = "",
            resource: str = "") -> Hub:
    """The hub ``name``; ``authorized_hubs`` (None: no auth) must hold it, lower case, with the right
    ``claim`` among the rights of its token (``Send`` for a sender, ``Listen`` for a receiver).

    ``resource`` is the entity the link names (``sb://host/hub[/consumergroups/g/partitions/p]``), for
    the refusal's text, which is the service's.
    """
    hub = store.get(name)
    if hub is None:
        raise Refused("amqp:not-found", f"The messaging entity '{name}' could not be found. (404)")
    if authorized_hubs is not None:
        rights = authorized_hubs.get(hub.name.lower())
        if rights is None:
            raise Refused("amqp:unauthorized-access",
                          f"Unauthorized access to '{hub.name}': no valid token for this hub was put on $cbs.")
        if claim and claim not in rights:
            raise Refused("amqp:unauthorized-access", unauthorized_description(claim, resource))
    return hub


def entity_url(host: str, hub: str, *rest: str) -> str:
    """An entity as the service names it in errors: ``sb://host/hub[/...]``, the path in lower case."""
    return "sb://" + "/".join([host, hub.lower(), *(part.lower() for part in rest)])


def unauthorized_description(claim: str, resource: str) -> str:
    """The service's text for a valid token whose rule lacks ``claim``."""
    return f"Unauthorized access. '{claim}' claim(s) are required to perform this operation. Resource: '{resource}'."


def entity_gone(host: str, hub: str, group: str | None = None) -> Refused:
    """Why a link on a hub (or on a consumer group of it) that was deleted is detached: the service's
    ``amqp:not-found``, naming the hub, or the consumer group, as ``sb://host/hub[/consumergroups/group]``."""
    url = entity_url(host, hub) if group is None else entity_url(host, hub, "consumergroups", group)
    return Refused("amqp:not-found", f"The messaging entity '{url}' could not be found.")


def producer_target(hub: Hub, path: list[str], address: str) -> int | None:
    """The partition a producer address names (None: the broker places each event)."""
    if len(path) == 3 and path[1].lower() == "partitions":
        if hub.partition(path[2]) is None:
            raise Refused("amqp:not-found", f"Partition '{path[2]}' of '{hub.name}' does not exist.")
        return int(path[2])
    if len(path) != 1:
        raise Refused("amqp:not-found", f"unsupported producer address {address!r}")
    return None


def consumer_source(hub: Hub, path: list[str], address: str) -> ConsumerSource:
    """The consumer group and partition a consumer address names."""
    if len(path) != 5 or path[1].lower() != "consumergroups" or path[3].lower() != "partitions":
        raise Refused("amqp:not-found", f"unsupported consumer address {address!r}")
    group, partition_id = path[2], path[4]
    if not hub.has_group(group):
        raise Refused("amqp:not-found",
                      f"The messaging entity '{hub.name}/ConsumerGroups/{group}' could not be found. (404)")
    log = hub.partition(partition_id)
    if log is None:
        raise Refused("amqp:not-found", f"Partition '{partition_id}' of '{hub.name}' does not exist.")
    return ConsumerSource(hub, group, partition_id, log)
