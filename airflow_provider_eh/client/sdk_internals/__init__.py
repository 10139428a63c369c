"""Every use of azure-eventhub's private names, in one package, each with its reason.

The package leans on the SDK's non-public building blocks where its public API has no way to do what
exactly-once publishing and fast reading need: attach a sender as an idempotent producer, share one
AMQP connection between handlers, append pre-encoded messages to a batch, hand received AMQP messages
over without building ``EventData``. Those names may change in any release, so they are touched only
in this package; every other module calls the named functions and classes this module exports (``__all__``;
``tests/repo/test_private_sdk_names.py`` holds the rest of the package to that).

This module keeps the registry; its modules, one per group of names, hold the uses:

- ``amqp_values``: typed AMQP values (``client/fencing.py``, ``publishing/wire.py``);
- ``batches``: one encode per event into an ``EventDataBatch`` (``publishing/batching.py``, ``publishing/wire.py``);
- ``receiving``: received messages and partition receivers of our own (``client/received_fields.py``,
  ``client/partition_readers.py``);
- ``shared_connection``: one AMQP connection per hub (``client/connection.py``);
- ``hooked_clients``: producer and consumer clients on the shared connection (``client/single_connection.py``);
- ``sender_links``: idempotent-producer sender links (``client/fencing.py``);
- ``errors``: the SDKs' error classes and what each says, for the error map (``client/failures/``).

:func:`check` verifies that the installed SDK still has the internals (the :data:`INTERNALS` table: a
name per row, with the feature that needs it and why), building the SDK's objects offline where the
shape is only visible on an instance. Every feature has a way to work without its internals (the
SDK's public path, a connection per handler, the claim's lease alone for fencing), taken with a
warning; ``hub_fencing="required"`` turns a missing fencing internal into an error instead
(:func:`airflow_provider_eh.client.fencing.open_fenced`).

The tests in ``tests/unit/client/test_sdk_internals.py`` run against every release in the range
``pyproject.toml`` declares (``tests/integration/client/test_sdk_releases.py``).
"""

from __future__ import annotations

import functools
import importlib
import logging
from dataclasses import dataclass
from typing import Any

from azure.eventhub import EventDataBatch, EventHubConsumerClient, EventHubProducerClient

from airflow_provider_eh.client.sdk_internals.amqp_values import amqp_type, encode_value, typed, typed_value_keys
from airflow_provider_eh.client.sdk_internals.batches import batch_add_once, batch_append, pyamqp_batch, sdk_encode
from airflow_provider_eh.client.sdk_internals.errors import ErrorKind, amqp_condition, error_kinds, kinds_named
from airflow_provider_eh.client.sdk_internals.hooked_clients import HookedConsumerClient, HookedProducerClient
from airflow_provider_eh.client.sdk_internals.receiving import (
    buffered_count,
    can_create_consumers,
    client_max_retries,
    create_consumer,
    event_data_of,
    hand_over_messages,
    message_of,
    wrap_consumer_delivery,
    wrap_consumer_errors,
)
from airflow_provider_eh.client.sdk_internals.sender_links import (
    AttachAnswer,
    attach_answer,
    attach_as,
    attach_plain,
    detach_error,
    partition_producer,
    reattach,
)
from airflow_provider_eh.client.sdk_internals.shared_connection import (
    connection_transport,
    connection_usable,
    create_management_client,
    idle_read,
    management_request,
    share_handler_connection,
    shareable,
    transport_buffered,
)

__all__ = [
    # the registry
    "BATCH_FAST_PATH", "DIRECT_RECEIVE", "FEATURES", "FENCING", "INTERNALS", "SHARED_CONNECTION", "Internal",
    "check", "describe_missing", "sdk_version", "supported",
    # typed AMQP values
    "amqp_type", "encode_value", "typed", "typed_value_keys",
    # EventDataBatch
    "batch_add_once", "batch_append", "batch_fast_path", "sdk_encode",
    # received messages and partition receivers
    "buffered_count", "can_create_consumers", "client_max_retries", "create_consumer", "event_data_of",
    "hand_over_messages", "message_of", "wrap_consumer_delivery", "wrap_consumer_errors",
    # the shared connection
    "connection_transport", "connection_usable", "create_management_client", "idle_read", "management_request",
    "share_handler_connection", "shareable", "transport_buffered",
    # the single-connection clients
    "HookedConsumerClient", "HookedProducerClient",
    # the SDKs' error classes, by type
    "ErrorKind", "amqp_condition", "error_kinds", "kinds_named",
    # idempotent-producer sender links
    "AttachAnswer", "attach_answer", "attach_as", "attach_plain", "detach_error", "partition_producer", "reattach",
]


log = logging.getLogger(__name__)

FENCING = "fencing"  # idempotent-producer sender links (client/fencing.py)
SHARED_CONNECTION = "shared connection"  # one AMQP connection per hub (client/connection.py, client/single_connection.py)
BATCH_FAST_PATH = "batch fast path"  # one encode per event (publishing/batching.py, publishing/wire.py)
DIRECT_RECEIVE = "direct receive"  # links of our own, messages without EventData (client/partition_readers.py)
FEATURES = (FENCING, SHARED_CONNECTION, BATCH_FAST_PATH, DIRECT_RECEIVE)


def sdk_version() -> str:
    """The installed azure-eventhub's version."""
    from azure.eventhub import __version__

    return str(__version__)


@dataclass(frozen=True)
class Internal:
    """
    One private name the package relies on.

    :param feature: what needs it (one of :data:`FEATURES`).
    :param where: ``module:Class.attribute`` (a class attribute or method), ``module:NAME`` (a module's
        name) or ``instance:Kind.attribute`` (an attribute only an instance has; :func:`check` builds
        the instance offline).
    :param why: why the public API does not do.
    """

    feature: str
    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.where} ({self.feature})"


_P = "azure.eventhub._pyamqp"
INTERNALS: tuple[Internal, ...] = (
    # -- typed AMQP values: the wire types the hub requires (a short owner level, a long group id) --
    Internal(FENCING, f"{_P}._encode:TYPE", "the key of a pre-typed value for the SDK's encoder"),
    Internal(FENCING, f"{_P}._encode:VALUE", "the value key of a pre-typed value"),
    Internal(FENCING, f"{_P}._encode:encode_value", "the encoder the fenced annotations' bytes are proven against"),
    Internal(FENCING, f"{_P}.types:AMQPTypes", "the AMQP type names (short, int, long, symbol, string)"),
    # -- the idempotent-producer attach: no public way to set a link capability or typed link properties --
    Internal(FENCING, "azure.eventhub._producer_client:EventHubProducerClient._start_producer",
             "opens (or reuses) the partition's producer, as send_batch does"),
    Internal(FENCING, "instance:EventHubProducerClient._producers", "the client's producer per partition"),
    Internal(FENCING, "azure.eventhub._producer:EventHubProducer._create_handler",
             "builds the send client; wrapped to type the link properties and ask for the capability"),
    Internal(FENCING, "azure.eventhub._producer:EventHubProducer._open_with_retry", "re-attaches the link"),
    Internal(FENCING, "azure.eventhub._producer:EventHubProducer._close_handler", "detaches the old link"),
    Internal(FENCING, "instance:EventHubProducer._handler", "the producer's pyamqp SendClient"),
    Internal(FENCING, "instance:SendClient._link_properties", "the attach's properties (typed by us)"),
    Internal(FENCING, "instance:SendClient._client_ready", "creates the sender link on the session"),
    Internal(FENCING, "instance:SendClient._link", "the attached link: the hub's answer"),
    Internal(FENCING, "instance:SendClient._session", "the session the sender link is created on"),
    Internal(FENCING, "instance:SendClient._connection", "read for the hub's detach right after an attach"),
    Internal(FENCING, f"{_P}.session:Session.create_sender_link", "takes desired_capabilities"),
    Internal(FENCING, f"{_P}.constants:LinkState.ATTACHED", "a link the hub did not detach at once"),
    # -- one AMQP connection for every handler (the SDK's own shared mode does not work with pyamqp) --
    Internal(SHARED_CONNECTION, f"{_P}._connection:_CLOSING_STATES", "a connection that can no longer be shared"),
    Internal(SHARED_CONNECTION, f"{_P}.constants:ConnectionState.CLOSE_RCVD", "the peer closed it"),
    Internal(SHARED_CONNECTION, f"{_P}._connection:Connection._get_remote_timeout", "the heartbeat of an idle read"),
    Internal(SHARED_CONNECTION, f"{_P}._transport:_AbstractTransport", "the transport whose socket is waited on"),
    Internal(SHARED_CONNECTION, "instance:SendClient._external_connection", "a handler's close keeps the connection"),
    Internal(SHARED_CONNECTION, "azure.eventhub._client_base:ClientBase._create_auth", "a handler's credential"),
    Internal(SHARED_CONNECTION, "azure.eventhub._client_base:ClientBase._management_request",
             "every management request goes through it: sent over one kept link instead"),
    Internal(SHARED_CONNECTION, "azure.eventhub._constants:MGMT_STATUS_CODE", "the management answer's status"),
    Internal(SHARED_CONNECTION, "azure.eventhub._constants:READ_OPERATION", "the management operation"),
    Internal(SHARED_CONNECTION, "azure.eventhub._producer_client:EventHubProducerClient._create_producer",
             "each producer's open is replaced by one on the shared connection, without the 50 ms sleeps"),
    Internal(SHARED_CONNECTION, "azure.eventhub._consumer_client:EventHubConsumerClient._create_consumer",
             "each receiver's open is replaced by one on the shared connection"),
    Internal(SHARED_CONNECTION, "azure.eventhub._producer:EventHubProducer._open", "the replaced open"),
    Internal(SHARED_CONNECTION, "azure.eventhub._consumer:EventHubConsumer._open", "the replaced open"),
    # -- one encode per event into an EventDataBatch --
    Internal(BATCH_FAST_PATH, "azure.eventhub._common:_BATCH_MESSAGE_OVERHEAD_COST", "the SDK's size rule"),
    Internal(BATCH_FAST_PATH, f"{_P}.utils:encode_payload", "the SDK's message encoder"),
    Internal(BATCH_FAST_PATH, "azure.eventhub._tracing:trace_message", "the trace properties add adds"),
    Internal(BATCH_FAST_PATH, "azure.eventhub._transport._pyamqp_transport:PyamqpTransport", "the batch's transport"),
    Internal(BATCH_FAST_PATH, "azure.eventhub._utils:transform_outbound_single_message", "EventData to a message"),
    Internal(BATCH_FAST_PATH, "instance:EventDataBatch._message", "the batch message whose data sections we append"),
    Internal(BATCH_FAST_PATH, "instance:EventDataBatch._size", "the size the SDK's rule keeps"),
    Internal(BATCH_FAST_PATH, "instance:EventDataBatch._count", "the count len(batch) reads"),
    Internal(BATCH_FAST_PATH, "instance:EventDataBatch._internal_events", "the EventData add keeps"),
    # -- receiving: links of our own, AMQP messages handed over as they came --
    Internal(DIRECT_RECEIVE, "instance:EventHubConsumer._handle_exception", "counts a link's failures across calls"),
    Internal(DIRECT_RECEIVE, "instance:EventHubConsumer._on_event_received", "the consumer's delivery callback"),
    Internal(DIRECT_RECEIVE, "instance:EventHubConsumer._message_buffer", "the received, undelivered messages"),
    Internal(DIRECT_RECEIVE, "azure.eventhub._consumer:EventHubConsumer._next_message_in_buffer",
             "replaced to hand messages over without EventData"),
    Internal(DIRECT_RECEIVE, "azure.eventhub._common:EventData._from_message", "EventData of a received message"),
)

_FAKE_CONNECTION = "Endpoint=sb://sdk-internals.invalid/;SharedAccessKeyName=k;SharedAccessKey=a2V5;EntityPath=h"


def _resolve(dotted: str, name: str) -> Any:
    value: Any = importlib.import_module(dotted)
    for part in name.split("."):
        value = getattr(value, part)
    return value


def _ignore(*_: Any) -> None:
    """A receiver's callback that is never called (its receiver is never opened)."""


def _instances() -> dict[str, Any]:
    """The SDK objects whose shape :func:`check` reads, built without any network (never opened)."""
    out: dict[str, Any] = {}
    producer_client = EventHubProducerClient.from_connection_string(_FAKE_CONNECTION)
    consumer_client = EventHubConsumerClient.from_connection_string(_FAKE_CONNECTION, consumer_group="$Default")
    try:
        out["EventHubProducerClient"] = producer_client
        producer = producer_client._create_producer(partition_id="0")  # private: the producer send_batch would build
        out["EventHubProducer"] = producer
        producer._create_handler(producer_client._create_auth())  # private: its handler, unopened
        out["SendClient"] = producer._handler
        out["EventDataBatch"] = EventDataBatch(max_size_in_bytes=1024)
        out["EventHubConsumer"] = consumer_client._create_consumer(  # private: a partition's receiver, unopened
            "$Default", "0", "-1", _ignore, prefetch=1)
    except Exception as exc:  # any of the calls above gone: the rows that need these objects are missing
        log.debug("building the SDK's objects offline failed: %s: %s", type(exc).__name__, exc)
    finally:
        for client in (producer_client, consumer_client):
            try:
                client.close()
            except Exception as exc:  # nothing was opened: nothing to keep
                log.debug("closing an offline client: %s", exc)
    return out


@functools.cache
def _missing(internals: tuple[Internal, ...]) -> tuple[Internal, ...]:
    instances = _instances()
    missing = []
    for internal in internals:
        where, name = internal.where.split(":", 1)
        try:
            if where == "instance":
                kind, attribute = name.split(".", 1)
                if not hasattr(instances[kind], attribute):
                    missing.append(internal)
            else:
                _resolve(where, name)
        except (ImportError, AttributeError, KeyError):
            missing.append(internal)
    return tuple(missing)


def check(feature: str | None = None) -> list[Internal]:
    """The internals the installed SDK lacks (all, or ``feature``'s); empty when every one is there.

    Computed once per process for the table (the SDK does not change under it).
    """
    return [i for i in _missing(INTERNALS) if feature is None or i.feature == feature]


def supported(feature: str) -> bool:
    """Whether the installed SDK has every internal ``feature`` relies on."""
    return not check(feature)


def describe_missing(missing: list[Internal]) -> str:
    """One line naming the SDK version and the internals it lacks."""
    return f"azure-eventhub {sdk_version()} lacks {', '.join(i.where for i in missing)}"


def batch_fast_path(batch: Any) -> bool:
    """True when the SDK has the batch fast path's internals and ``batch`` is a pyamqp ``EventDataBatch``
    with the fields :func:`batch_append` maintains (:func:`~airflow_provider_eh.client.sdk_internals.batches.pyamqp_batch`).
    """
    return not check(BATCH_FAST_PATH) and pyamqp_batch(batch)
