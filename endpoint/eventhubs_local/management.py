"""Requests on ``$cbs`` (put-token) and ``$management`` (READ of a hub or a partition).

Broker layer: a request arrives as its node, its application properties (as text) and its body
(the token of a put-token); the answer is a ``Reply`` (status, description, body map) that the AMQP
layer encodes. Integer body fields named in ``LONG_FIELDS`` are AMQP longs on the wire.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .auth import ALL_RIGHTS, AuthError, SasValidator, audience_hub
from .store import Store

_LOG = logging.getLogger("eventhubs_local")

LONG_FIELDS = frozenset({"created_at", "begin_sequence_number", "last_enqueued_sequence_number",
                         "last_enqueued_time_utc"})


@dataclass
class Reply:
    """The answer to one ``$cbs`` or ``$management`` request, which the AMQP layer encodes."""

    status: int
    description: str
    body: dict[str, Any] | None = None
    authorized_hub: str | None = field(default=None)  # a put-token that succeeded: the hub it opens
    rights: frozenset[str] = ALL_RIGHTS  # ... and the rights of the rule that signed its token


class Management:
    """Answers ``$cbs`` and ``$management`` requests for one store."""

    def __init__(self, store: Store, validator: SasValidator | None):
        self.store = store
        self.validator = validator

    def handle(self, client_id: int, node: str, get: Callable[[str], str | None], body: str | None) -> Reply:
        """Answer one request; ``get`` reads an application property as text."""
        operation = get("operation")
        try:
            if node == "$cbs":
                if operation != "put-token":
                    return Reply(400, f"unsupported $cbs operation {operation!r}")
                return self.put_token(client_id, get("name") or "", body or "")
            if operation != "READ":
                return Reply(400, f"unsupported $management operation {operation!r}")
            return self.read(get("type"), get("name"), get("partition"), get("security_token"))
        except Exception as exc:  # noqa: BLE001 - a request must never take the server down
            _LOG.exception("conn %s: %s request failed", client_id, node)
            return Reply(500, f"internal error handling {node} request: {exc!r}")

    def put_token(self, client_id: int, audience: str, token: str) -> Reply:
        if self.validator is None:
            return Reply(202, "Accepted", authorized_hub=audience_hub(audience))
        try:
            grant = self.validator.grant(token, audience)
        except AuthError as exc:
            _LOG.info("conn %s: put-token for %s refused: %s", client_id, audience, exc)
            return Reply(401, f"Unauthorized: {exc}")
        return Reply(202, "Accepted", authorized_hub=grant.hub, rights=grant.rights)

    def read(self, kind: str | None, name: str | None, partition: str | None, token: str | None) -> Reply:
        hub = self.store.get(name or "")
        if hub is None:
            return Reply(404, f"The messaging entity '{name}' could not be found.")
        if self.validator is not None:
            # any valid token for the hub reads it, whatever the rights of its rule (each has one of Send,
            # Listen, Manage): the Python SDK's producer reads the partition ids before it attaches, and a
            # Send-only rule is what a producer is given
            try:
                self.validator.validate(token or "", f"sb://x/{hub.name}")
            except AuthError as exc:
                return Reply(401, f"Unauthorized: {exc}")
        if kind == "com.microsoft:eventhub":
            return Reply(200, "OK", {"name": hub.name, "created_at": hub.created_at,
                                     "partition_count": hub.partition_count, "partition_ids": hub.partition_ids,
                                     "type": "com.microsoft:eventhub"})
        if kind == "com.microsoft:partition":
            log = hub.partition(partition or "")
            if log is None:
                return Reply(404, f"Partition '{partition}' of '{hub.name}' does not exist.")
            return Reply(200, "OK", {
                "name": hub.name, "partition": partition, "type": "com.microsoft:partition",
                "begin_sequence_number": log.begin_seq,
                "last_enqueued_sequence_number": log.last_seq,
                "last_enqueued_offset": str(log.last_offset()),
                "last_enqueued_time_utc": log.last_time(),
                "is_partition_empty": log.is_empty,
            })
        return Reply(400, f"unsupported $management type {kind!r}")
