"""The package's one error hierarchy.

No Airflow import here: the publishing and ingestion engines raise these too.
Every error says whether an Airflow retry can help (``retryable``); operators turn the
non-retryable ones into ``AirflowFailException`` so that Airflow does not burn retries on them.
"""

from __future__ import annotations


class EventHubsProviderError(Exception):
    """Base of every error raised by this package.

    ``conn_id`` names the Airflow connection at fault when one is (``None`` otherwise).
    """

    retryable: bool = False
    conn_id: str | None = None


class ConnectionConfigError(EventHubsProviderError):
    """An Airflow connection is missing a field, has a malformed one, or cannot be reached."""

    def __init__(self, conn_id: str, message: str):
        self.conn_id = conn_id
        super().__init__(f"Connection {conn_id!r}: {message}")


class ConnectionUnreachableError(ConnectionConfigError):
    """The service behind a connection did not answer; a retry may help."""

    retryable = True


class ProxyRefusedError(ConnectionConfigError):
    """The connection's HTTP proxy refused the tunnel: its credentials (401, 407) or the address (403)."""


class CredentialRefusedError(ConnectionConfigError):
    """The service refused the connection's credential: a wrong key, an expired token, an identity without the role."""


class ServiceBusyError(EventHubsProviderError):
    """The service kept throttling (ServerBusy, 429, 503) after the client's own retries; a later retry may pass."""

    retryable = True


class ProducerDisconnectedError(EventHubsProviderError):
    """Another publisher owns the (producer group, partition); retry after back-off."""

    retryable = True


class FencingRangeError(EventHubsProviderError):
    """A producer group's owner level or the hub's sequence numbers outgrew the hub's wire types (16 and 32 bits)."""


class HubFencingUnavailableError(EventHubsProviderError):
    """``hub_fencing="required"``, and the hub or the installed SDK cannot attach idempotent producers."""


class BatchContentChangedError(EventHubsProviderError):
    """A retried batch carries different content than its first attempt."""


class InvalidProducerStateError(EventHubsProviderError):
    """The stored producer state cannot be reconciled with what the partition holds."""


class ProducerStateStoreError(EventHubsProviderError):
    """The producer state store itself cannot be used: its container is missing, or access is refused."""


class EventTooLargeError(EventHubsProviderError):
    """One event is larger than the link's maximum message size."""


class InvalidEventError(EventHubsProviderError):
    """An event cannot be built from the input: body not serialisable, bad key, bad partition."""


class SchemaNotRegisteredError(EventHubsProviderError):
    """A publish's schema is not in the schema group (register it, or publish with ``auto_register_schema=True``)."""


class SchemaIncompatibleError(EventHubsProviderError):
    """A publish's schema is not compatible with the latest registered version, as ``schema_compatibility`` asks;
    the message names the fields at fault."""


class MissingExtraError(EventHubsProviderError):
    """A feature's optional packages are not installed where the task runs; the message names the extra."""

    def __init__(self, feature: str, extra: str, missing: str):
        super().__init__(
            f"{feature} needs the provider's {extra} extra, which is not installed where this runs ({missing} cannot "
            f"be imported): pip install 'airflow-provider-eh[{extra}]' into the Airflow environment (workers and "
            "triggerer), then retry"
        )


class CheckpointStoreError(EventHubsProviderError):
    """Checkpoints or ownership cannot be read or written (missing container, bad layout)."""


class UnknownPartitionError(EventHubsProviderError):
    """A partition named by the caller does not exist in the hub."""


class EventTriggerConfigError(EventHubsProviderError, ValueError):
    """A bad argument of the event trigger or sensor; the message names it and what to do."""

    retryable = False


class DataSourceOptionError(EventHubsProviderError, ValueError):
    """An option of the ``eventhubs`` Spark data source is missing or wrong; the message names it and what to give."""


class EventsExpiredError(EventHubsProviderError):
    """Events a read was to include are no longer in the hub: its retention dropped them before they were read."""


class SinkConfigError(EventHubsProviderError):
    """The SQL sink is misconfigured: a table, column or option is missing or not allowed."""


class PartitionTakenOverError(EventHubsProviderError):
    """Another consumer instance committed progress on a partition this one was processing."""

    retryable = True


class IngestStalledError(EventHubsProviderError):
    """A partition delivered no event for too long although the run's target was not reached."""

    retryable = True


class ReadBackStalledError(EventHubsProviderError, TimeoutError):
    """No event arrived for ``idle_timeout`` seconds before a read-back reached its end; the caller says what that means."""

    retryable = True

    def __init__(self, partition_id: str, last: int, end: int, idle_timeout: float):
        self.partition_id, self.last, self.end, self.idle_timeout = partition_id, last, end, idle_timeout
        super().__init__(
            f"partition {partition_id}: read-back stalled at sequence number {last} of {end} "
            f"(nothing for {idle_timeout:g} s)"
        )


class DeadLetterNotFoundError(EventHubsProviderError):
    """A dead letter asked for (partition, sequence number) is not in the dead-letter table."""


class ReplayRaceError(EventHubsProviderError):
    """Another replay of the same dead letters committed first; this one wrote no rows, and running it again skips
    what the other replayed."""

    retryable = True


class UnknownEventHubError(EventHubsProviderError):
    """The hub does not exist on the namespace, or the credential cannot see it."""


class UnknownConsumerGroupError(EventHubsProviderError):
    """The consumer group does not exist on the hub."""


class TriggerReportedError(EventHubsProviderError):
    """An error a trigger reported as data (its type and text in the message, and ``retryable``).

    A trigger runs in the triggerer and hands its error to the task as an event; the task raises
    this in its place, so the error is mapped like one raised in the task itself.
    """

    def __init__(self, message: str, retryable: bool):
        super().__init__(message)
        self.retryable = retryable


class SparkPublishError(EventHubsProviderError):
    """Publishing a Spark output failed; ``retryable`` says whether a new run can complete it."""

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


class OutputNotFoundError(SparkPublishError):
    """The output path or table does not exist."""


class EmptyOutputError(SparkPublishError):
    """The output has no rows and ``on_empty="fail"``."""


class SparkUnavailableError(SparkPublishError):
    """A session with a master (not Spark Connect) cannot start here: no Spark distribution or no Java."""

    def __init__(self, where: str, reason: str):
        super().__init__(
            f"Spark ({where}) cannot start in this task: {reason}. With a master URL the Spark driver runs inside "
            "the task and needs a Spark distribution and Java 17+ here: install the provider's spark extra "
            "(pip install 'airflow-provider-eh[spark]', pyspark with its jars) or set SPARK_HOME to a Spark "
            "installation; or run on a Spark Connect server, which needs neither: a spark_connect connection or "
            "a Spark connection whose host is sc://host:15002."
        )


class UnreadableVariableError(EventHubsProviderError):
    """An Airflow Variable exists but its value cannot be read (a changed Fernet key): never to be mistaken for an
    absent producer state."""


class UndecodableEventError(EventHubsProviderError, ValueError):
    """A typed event that cannot be decoded; the message says why (naming the schema id) and what to do."""


class CommitProcessError(EventHubsProviderError, RuntimeError):
    """A data source commit process failed with an error that could not be carried back as itself: its type and
    message. Retryable: the commit is exactly once, and what failed is not known to be a setting."""

    retryable = True


class ViewReadError(EventHubsProviderError):
    """A read the Event Hubs view could not make, in words fit for the person looking at it (no raw error text).

    ``retryable`` when the service or storage behind the read failed (a 5xx answer): a refresh may
    succeed; a bad setting or a missing connection (4xx) stays as it is until someone changes it.

    :param message: what failed, why as far as the error's class tells, and what to check.
    :param status_code: the HTTP status the view's API answers with.
    """

    def __init__(self, message: str, status_code: int = 502):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.retryable = status_code >= 500
