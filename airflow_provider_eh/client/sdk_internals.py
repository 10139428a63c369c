"""Every use of azure-eventhub's private names, in one place, each with its reason.

The package leans on the SDK's non-public building blocks where its public API has no way to do what
exactly-once publishing and fast reading need: attach a sender as an idempotent producer, share one
AMQP connection between handlers, append pre-encoded messages to a batch, hand received AMQP messages
over without building ``EventData``. Those names may change in any release, so they are touched only
here; every other module calls the named functions and classes below (``tests/repo/test_private_sdk_names.py``
holds the rest of the package to that).

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
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from azure.eventhub import EventData, EventDataBatch, EventHubConsumerClient, EventHubProducerClient

log = logging.getLogger(__name__)

FENCING = "fencing"  # idempotent-producer sender links (client/fencing.py)
SHARED_CONNECTION = "shared connection"  # one AMQP connection per hub (client/connection.py, client/lean.py)
BATCH_FAST_PATH = "batch fast path"  # one encode per event (publishing/batching.py, publishing/wire.py)
DIRECT_RECEIVE = "direct receive"  # links of our own, messages without EventData (client/receive.py)
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


# ---- typed AMQP values (fencing.py, wire.py) -----------------------------------------------------


def typed_value_keys() -> tuple[Any, Any]:
    """``(TYPE, VALUE)``: the keys of a pre-typed value for the SDK's encoder; ``ImportError`` on another transport.

    Private: the SDK's encoder guesses an untyped value's AMQP type; the hub wants a short, an int and
    a long where Python has one ``int``, and guessing costs more per event than the rest of it.
    """
    from azure.eventhub._pyamqp._encode import TYPE, VALUE

    return TYPE, VALUE


def amqp_type(name: str) -> Any:
    """The SDK's AMQP type ``name`` (``"long"``, ``"short"``, ``"int"``, ``"symbol"``, ``"string"``)."""
    from azure.eventhub._pyamqp.types import AMQPTypes  # private: the type names of typed values

    return getattr(AMQPTypes, name)


def typed(name: str, value: Any) -> dict[Any, Any]:
    """``value`` typed as the AMQP type ``name`` for the SDK's encoder."""
    key_type, key_value = typed_value_keys()
    return {key_type: amqp_type(name), key_value: value}


def encode_value(out: bytearray, value: Any) -> None:
    """Append ``value``'s AMQP encoding, by the SDK's own encoder (private: the reference our bytes are proven against)."""
    from azure.eventhub._pyamqp._encode import encode_value as encode

    encode(out, value)


# ---- EventDataBatch (batching.py) --------------------------------------------------------------


def batch_fast_path(batch: Any) -> bool:
    """True when ``batch`` is a pyamqp ``EventDataBatch`` with the fields :func:`batch_append` maintains."""
    try:
        from azure.eventhub._transport._pyamqp_transport import PyamqpTransport  # private: the batch's transport
    except ImportError:
        return False
    return (
        not check(BATCH_FAST_PATH)
        and getattr(batch, "_amqp_transport", None) is PyamqpTransport
        and not getattr(batch, "_partition_key", None)  # a keyed batch stamps every message: the SDK's add
        and all(hasattr(batch, name) for name in ("_message", "_internal_events", "_size", "_count", "_tracing_attributes"))
    )


def batch_append(batch: Any, encoded: bytes | bytearray) -> None:
    """Append one encoded message to ``batch`` by the SDK's size rule; ``ValueError`` when it does not fit.

    Private fields: ``EventDataBatch.add`` encodes each message twice (to measure, then to append);
    the SDK's rule is ``size + 5`` bytes of overhead under 256 bytes, else ``+ 8``. No ``EventData``
    is kept: ``_internal_events`` feeds only the buffered producer's callbacks and tracing links.
    """
    from azure.eventhub._common import _BATCH_MESSAGE_OVERHEAD_COST

    size = len(encoded)
    size_after_add = batch._size + size + _BATCH_MESSAGE_OVERHEAD_COST[0 if size < 256 else 1]
    if size_after_add > batch.max_size_in_bytes:
        raise ValueError(f"EventDataBatch has reached its size limit: {batch.max_size_in_bytes}")
    batch._message[5].append(encoded)
    batch._size = size_after_add
    batch._count += 1


def sdk_encode(event: EventData, transport: Any = None, tracing_attributes: Any = None) -> bytearray:
    """``event`` encoded once by the SDK's own path, as ``EventDataBatch.add`` appends it (trace properties included).

    Private: the SDK's outbound conversion, tracing and encoder, the steps ``add`` takes.
    """
    from azure.eventhub._pyamqp.utils import encode_payload
    from azure.eventhub._tracing import trace_message
    from azure.eventhub._transport._pyamqp_transport import PyamqpTransport
    from azure.eventhub._utils import transform_outbound_single_message

    transport = transport or PyamqpTransport
    outgoing = transform_outbound_single_message(event, EventData, transport.to_outgoing_amqp_message)
    message = trace_message(outgoing._message, amqp_transport=transport, additional_attributes=tracing_attributes)
    output = bytearray()
    encode_payload(output, message)
    return output


def batch_add_once(batch: Any, event: EventData) -> None:
    """``batch.add(event)`` with one encode instead of two (only where :func:`batch_fast_path`)."""
    batch_append(batch, sdk_encode(event, batch._amqp_transport, batch._tracing_attributes))
    batch._internal_events.append(event)


# ---- received messages (received.py, receive.py) ------------------------------------------------


def event_data_of(message: Any) -> EventData:
    """The SDK's ``EventData`` of a received AMQP message (private: what its consumer builds for each)."""
    return EventData._from_message(message)


def message_of(event: Any) -> Any:
    """The AMQP message a received ``EventData`` wraps (private: its delivery annotations are not public), or ``None``."""
    return getattr(event, "_message", None)


# ---- partition receivers of our own (receive.py) ------------------------------------------------


def can_create_consumers(client: Any) -> bool:
    """Whether ``client`` can create partition receivers directly (:func:`create_consumer`)."""
    return hasattr(client, "_create_consumer")


def create_consumer(client: Any, consumer_group: str, partition_id: str, position: Any,
                    on_batch: Callable[[Any], None], **kwargs: Any) -> Any:
    """A partition's receiver of ``client``, unopened, driven by ``receive(batch=True, ...)``.

    Private: the call the SDK's ``EventProcessor`` makes for each partition it owns; its public
    ``receive_batch`` starts a processor per call (see :mod:`~airflow_provider_eh.client.receive`).
    """
    return client._create_consumer(consumer_group, partition_id, position, on_batch, **kwargs)


def client_max_retries(client: Any) -> int:
    """The client's retry budget (private: its configuration object)."""
    return int(getattr(getattr(client, "_config", None), "max_retries", 3))


def wrap_consumer_errors(consumer: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace the receiver's error handling by ``wrap(its own)`` (private: every error of a ``receive`` goes there)."""
    consumer._handle_exception = wrap(consumer._handle_exception)


def wrap_consumer_delivery(consumer: Any, wrap: Callable[[Callable[[Any], None]], Callable[[Any], None]]) -> None:
    """Replace the receiver's delivery callback by ``wrap(its own)`` (private: set at creation only)."""
    consumer._on_event_received = wrap(consumer._on_event_received)


def buffered_count(consumer: Any) -> Callable[[], int]:
    """A function giving how many received messages ``consumer`` has not delivered yet (private: its buffer)."""
    buffer = getattr(consumer, "_message_buffer", None)
    return (lambda: len(buffer)) if buffer is not None else (lambda: 0)


class _Resume:
    """What the SDK's consumer keeps of the last event handed over: its offset, to reconnect after it."""

    __slots__ = ("_message",)  # the name the SDK's EventData gives its message

    def __init__(self, message: Any):
        self._message = message

    @property
    def offset(self) -> str | None:
        try:
            return self._message.message_annotations[b"x-opt-offset"].decode("UTF-8")
        except (KeyError, AttributeError, TypeError):
            return None


def hand_over_messages(consumer: Any, deliver: Callable[[Any], None]) -> bool:
    """
    Make ``consumer`` hand its batches to ``deliver`` as the decoded AMQP messages it received, instead of
    building an ``EventData`` of each; ``False`` (nothing changed) where the SDK is not built the way
    this relies on. Private: the consumer's ``receive`` takes each message of a batch from its buffer
    through ``_next_message_in_buffer`` and, to reconnect after a lost link, reads the offset of the
    last one from ``_last_received_event``: both are kept.
    """
    buffer = getattr(consumer, "_message_buffer", None)
    transport = getattr(getattr(consumer, "_amqp_transport", None), "KIND", None)
    if buffer is None or transport != "pyamqp" or not hasattr(consumer, "_next_message_in_buffer"):
        return False

    def next_message() -> Any:
        message = buffer.popleft()
        consumer._last_received_event = _Resume(message)
        return message

    consumer._next_message_in_buffer = next_message
    consumer._on_event_received = deliver
    return True


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


# ---- producer and consumer clients on the shared connection (lean.py) ---------------------------


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
