"""The package's one error hierarchy.

No Airflow import here: the publishing engine and the local endpoint's client tools use these too.
Every error says whether an Airflow retry can help (``retryable``); operators turn the
non-retryable ones into ``AirflowFailException`` so that Airflow does not burn retries on them.
"""

from __future__ import annotations


class EventHubsProviderError(Exception):
    """Base of every error raised by this package."""

    retryable: bool = False


class ConnectionConfigError(EventHubsProviderError):
    """An Airflow connection is missing a field, has a malformed one, or cannot be reached."""

    def __init__(self, conn_id: str, message: str):
        self.conn_id = conn_id
        super().__init__(f"Connection {conn_id!r}: {message}")


class ConnectionUnreachableError(ConnectionConfigError):
    """The service behind a connection did not answer; a retry may help."""

    retryable = True


class ProducerDisconnectedError(EventHubsProviderError):
    """Another publisher owns the (producer group, partition); retry after back-off."""

    retryable = True


class FencingRangeError(EventHubsProviderError):
    """A producer group's owner level or the hub's sequence numbers outgrew the hub's wire types (16 and 32 bits)."""


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


class CheckpointStoreError(EventHubsProviderError):
    """Checkpoints or ownership cannot be read or written (missing container, bad layout)."""


class UnknownPartitionError(EventHubsProviderError):
    """A partition named by the caller does not exist in the hub."""


class SinkConfigError(EventHubsProviderError):
    """The SQL sink is misconfigured: a table, column or option is missing or not allowed."""


class PartitionTakenOverError(EventHubsProviderError):
    """Another consumer instance committed progress on a partition this one was processing."""

    retryable = True


class IngestStalledError(EventHubsProviderError):
    """A partition delivered no event for too long although the run's target was not reached."""

    retryable = True


class DeadLetterNotFoundError(EventHubsProviderError):
    """A dead letter asked for (partition, sequence number) is not in the dead-letter table."""


class UnknownEventHubError(EventHubsProviderError):
    """The hub does not exist on the namespace, or the credential cannot see it."""
