"""Idempotent-producer sender links: the attach that asks for the capability, and the hub's answer.

Part of the adapter :mod:`airflow_provider_eh.client.sdk_internals`: the rest of the package calls these
names from there, never from this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# ---- idempotent-producer sender links (fencing.py) ----------------------------------------------


def partition_producer(client: Any, partition_id: str, send_timeout: float | None) -> Any:
    """``client``'s producer of ``partition_id``, created as ``send_batch`` would (private: the client's producers)."""
    client._start_producer(partition_id, send_timeout)
    return client._producers[partition_id]


def attach_as(producer: Any, capability: bytes, link_properties: Callable[[Any], dict[Any, Any]]) -> None:
    """
    Make every attach of ``producer``'s sender link ask for ``capability`` with ``link_properties(existing)``.

    Private: the SDK neither sets a link's desired capabilities nor types its link properties; this
    wraps the producer's handler factory (``_create_handler``) so that the handler's link properties
    are ours and its session's ``create_sender_link`` gets the capability for the one call that
    creates the link (in ``_client_ready``).
    """
    original = type(producer)._create_handler

    def create_handler(auth: Any) -> None:
        original(producer, auth)
        handler = producer._handler
        handler._link_properties = link_properties(handler._link_properties)
        ready = handler._client_ready

        def client_ready() -> bool:
            session = getattr(handler, "_session", None)
            if handler._link is None and session is not None:
                create = session.create_sender_link

                def create_sender_link(target_address: Any, **kwargs: Any) -> Any:
                    return create(target_address, desired_capabilities=[capability], **kwargs)

                session.create_sender_link = create_sender_link
                try:
                    return ready()
                finally:
                    del session.create_sender_link
            return ready()

        handler._client_ready = client_ready

    producer._create_handler = create_handler


def attach_plain(client: Any, partition_id: str) -> None:
    """Undo :func:`attach_as` on ``client``'s producer of ``partition_id``, closing a link it attached."""
    producer = (getattr(client, "_producers", None) or {}).get(partition_id)
    if producer is not None and "_create_handler" in vars(producer):
        del producer._create_handler
        if getattr(producer, "running", False):
            producer._close_handler()


def reattach(producer: Any) -> None:
    """Close ``producer``'s open link, if any, and attach it again with the SDK's retries (private: its open)."""
    if getattr(producer, "running", False):
        producer._close_handler()
    producer._open_with_retry()


@dataclass(frozen=True)
class AttachAnswer:
    """The hub's answer to a sender link's attach: the capabilities it offered and its link properties."""

    offered_capabilities: Any
    properties: Any


def attach_answer(producer: Any) -> AttachAnswer:
    """The hub's answer to ``producer``'s last attach (private: the handler's pyamqp link)."""
    link = producer._handler._link
    return AttachAnswer(link.offered_capabilities, link.remote_properties)


def detach_error(producer: Any, wait: float = 0.2) -> str | None:
    """The error of a detach that follows the attach answer at once (a refused link), else ``None``.

    A hub refuses a link by answering the attach and detaching it with the error right after; the SDK
    counts the link as attached on the answer alone. This reads the connection for up to ``wait``
    seconds to tell a refusal from a hub without the feature. Private: the link's state and error.
    """
    from azure.eventhub._pyamqp.constants import LinkState

    handler = producer._handler
    link, connection = handler._link, getattr(handler, "_connection", None)
    deadline = time.monotonic() + wait
    while connection is not None and link.state == LinkState.ATTACHED and time.monotonic() < deadline:
        connection.listen(wait=0.05)
    if link.state == LinkState.ATTACHED:
        return None
    error = getattr(link, "_error", None)
    return f"{type(error).__name__}: {error}" if error is not None else f"link state {link.state.name}"
