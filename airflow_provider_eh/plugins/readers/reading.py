"""What every read of the Event Hubs view starts from: the :class:`Source` a view shows and one request's :class:`Reading`.

A request reads through one :class:`Reading`: each connection it names is read once and each client
built once. A read that fails is reported by :func:`read_failure`: the error map's words
(:mod:`airflow_provider_eh.client.failures`: the connection, the address or proxy, the field to check),
never the SDK's text. The helpers at the end (:func:`iso`, :func:`partition_sort_key`) are how every
reader writes times and orders partitions.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.client.failures import FailureSite, StoreRole, provider_error
from airflow_provider_eh.errors import (
    CheckpointStoreError,
    ConnectionConfigError,
    ConnectionUnreachableError,
    CredentialRefusedError,
    EventHubsProviderError,
    ProducerStateStoreError,
    ProxyRefusedError,
    ServiceBusyError,
    UnknownConsumerGroupError,
    UnknownEventHubError,
    ViewReadError,
)
from airflow_provider_eh.plugins.redaction import connection_secrets, failure, log_failure

#: the ``wasb`` connection a source uses when neither it, its Event Hubs connection nor the configuration names one
DEFAULT_WASB_CONN_ID = "wasb_default"
#: connections the view keeps to a storage account: its reads run up to 16 threads each, two side by side
BLOB_CONNECTIONS = 32
#: what to check when a container of the view's source cannot be listed or read
CONTAINER_HINT = "Check that the container exists and that the connection may read it."


@dataclass(frozen=True)
class Source:
    """What one view shows: a hub of an Event Hubs connection and where its state lives."""

    event_hubs_conn_id: str
    eventhub_name: str | None = None
    wasb_conn_id: str | None = None  # None: wasb_default (once settled: the connection's or the configuration's)
    state_container: str | None = None
    checkpoint_container: str | None = None
    consumer_groups: tuple[str, ...] = ()
    sql_conn_id: str | None = None
    sink_consumer_group: str = "$Default"
    sink_prefix: str | None = None
    lag_consumer_group: str = "$Default"

    def connection_ids(self) -> list[str]:
        ids = [self.event_hubs_conn_id]
        if self.state_container or self.checkpoint_container:
            ids.append(self.wasb_conn_id or DEFAULT_WASB_CONN_ID)
        if self.sql_conn_id:
            ids.append(self.sql_conn_id)
        return ids


class _OneRead:
    """A hook that takes the connection its request already read instead of reading it again."""

    seeded: Any

    def get_connection(self, conn_id: str) -> Any:
        if conn_id == self.seeded.conn_id:
            return self.seeded
        return super().get_connection(conn_id)  # type: ignore[misc]


@functools.cache
def _one_read(hook_class: type) -> type:
    return type(f"OneRead{hook_class.__name__}", (_OneRead, hook_class), {})


class Reading:
    """One request's reads of one :class:`Source`: each connection read once, each client built once.

    ``secrets`` holds the secrets of the connections read, for :func:`~airflow_provider_eh.plugins.redaction.scrub`.
    """

    def __init__(self, source: Source):
        self.source = source
        self.secrets: set[str] = set()
        self._connections: dict[str, Any] = {}
        self._lock = threading.Lock()

    def connection(self, conn_id: str) -> Any:
        from airflow.exceptions import AirflowNotFoundException
        from airflow.sdk import BaseHook

        with self._lock:
            if conn_id not in self._connections:
                try:
                    conn = BaseHook.get_connection(conn_id)
                except AirflowNotFoundException:
                    raise ViewReadError(
                        f"connection {conn_id!r} is not defined; check the connection ids in the view's settings", 404
                    ) from None
                self._connections[conn_id] = conn
                self.secrets |= connection_secrets(conn)
            return self._connections[conn_id]

    def hook(self, base: type, conn_id: str, *args: Any, **kwargs: Any) -> Any:
        """A ``base`` hook of ``conn_id`` that uses this reading's copy of the connection."""
        hook = _one_read(base)(conn_id, *args, **kwargs)
        hook.seeded = self.connection(conn_id)
        return hook

    @functools.cached_property
    def endpoint(self) -> Any:
        from airflow_provider_eh.hooks.event_hubs import EventHubHook

        hook = self.hook(EventHubHook, self.source.event_hubs_conn_id, self.source.eventhub_name)
        try:
            return hook.get_endpoint()
        except ConnectionConfigError as exc:
            raise ViewReadError(str(exc), 400) from None

    @functools.cached_property
    def blob_hook(self) -> Any:
        from airflow_provider_eh.hooks.blob import BlobStorageHook

        # as many connections as the view's reads run threads at once: the producer states beside the checkpoints
        return self.hook(BlobStorageHook, self.source.wasb_conn_id or DEFAULT_WASB_CONN_ID, pool_size=BLOB_CONNECTIONS)

    def container(self, name: str) -> Any:
        try:
            return self.blob_hook.get_container_client(name)
        except ConnectionConfigError as exc:
            raise ViewReadError(str(exc), 400) from None

    def hub_site(self) -> FailureSite:
        """Where a read of the hub fails, for the error map."""
        return FailureSite.of_endpoint(self.source.event_hubs_conn_id, self.endpoint)

    def blob_site(self, container: str, container_field: str, role: StoreRole) -> FailureSite | None:
        """Where a read of ``container`` fails, for the error map (``None`` when the client cannot be built).

        :param role: what the container holds: a missing one is the store's error (``"not found"``).
        """
        try:
            return self.blob_hook.failure_site(container, container_field=f"the view's {container_field}", role=role)
        except Exception:  # the connection's client cannot be built: the read's own failure says so
            return None


#: what a failed read's error says, in the view's first words (the error map's message follows them)
_REASONS: tuple[tuple[type[EventHubsProviderError], str], ...] = (
    (UnknownEventHubError, "the Event Hub does not exist"),
    (UnknownConsumerGroupError, "the consumer group does not exist"),
    (ProducerStateStoreError, "not found"),
    (CheckpointStoreError, "not found"),
    (ProxyRefusedError, "the HTTP proxy refused the tunnel"),
    (CredentialRefusedError, "the credentials were refused"),
    (ServiceBusyError, "the service is busy"),
    (ConnectionUnreachableError, "the service did not answer"),
    (ConnectionConfigError, "the service cannot be reached as the connection is configured"),
)


def read_failure(what: str, exc: BaseException, site: FailureSite | None, hint: str) -> ViewReadError:
    """A :class:`ViewReadError` for ``exc`` raised while doing ``what`` at ``site``: the error map's message
    when it reads the error (a missing hub, consumer group or container answers 404, a setting to fix 400),
    else the class-only words of :func:`~airflow_provider_eh.plugins.redaction.failure` and ``hint``. The raw
    text goes to the log only."""
    mapped = provider_error(exc, site) if site is not None else None
    if mapped is None:
        return failure(what, exc, hint)
    log_failure(what, exc)
    reason = next((words for cls, words in _REASONS if isinstance(mapped, cls)), "the read failed")
    if reason.endswith("not found") and "does not exist" not in str(mapped):
        reason = "the read failed"
    # a missing hub, group or container: 404; a setting to fix (a refused credential, proxy or certificate, an address that
    # does not resolve): 400, as a malformed connection; the service failing or busy: 502 and 503, a refresh may pass
    missing_container = isinstance(mapped, (ProducerStateStoreError, CheckpointStoreError)) and "does not exist" in str(mapped)
    if isinstance(mapped, (UnknownEventHubError, UnknownConsumerGroupError)) or missing_container:
        status = 404
    elif not mapped.retryable:
        status = 400
    else:
        status = 503 if isinstance(mapped, ServiceBusyError) else 502
    return ViewReadError(f"{what}: {reason} ({type(exc).__name__}). {mapped} The API server's log has the details.",
                         status)


def iso(moment: datetime | None) -> str | None:
    """``moment`` in UTC as ISO 8601 (a naive time counts as UTC); ``None`` stays ``None``."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def partition_sort_key(partition_id: str) -> tuple[int, int | str]:
    """Numeric partition ids in numeric order (``2`` before ``10``), any other after them by name."""
    return (0, int(partition_id)) if str(partition_id).isdigit() else (1, str(partition_id))
