"""The partitions a caller names, held against the partitions the hub has.

One check for every part that names partitions (the event trigger, the await-event sensor and the
ingestion run by ``partition_ids``, the checkpoint sensor by its targets, the publisher by
``partition_options``): a name the hub does not have fails before anything is read or sent, with an
error that names it, the hub's partitions and the argument to fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from airflow_provider_eh.errors import EventHubsProviderError, UnknownPartitionError


def check_partition_ids(
    eventhub_name: str, wanted: Iterable[str], partition_ids: Sequence[str],
    error: type[EventHubsProviderError] = UnknownPartitionError, fix: str = "partition_ids",
) -> None:
    """
    Raise ``error`` when ``wanted`` names a partition that is not among the hub's ``partition_ids``.

    :param eventhub_name: the hub, for the message.
    :param wanted: the partition ids the caller asked for.
    :param partition_ids: the hub's partition ids, as the service lists them.
    :param error: the error class to raise (a trigger's argument error, for instance); its message
        reads ``Event Hub 'orders' has no partition 9 (it has 0, 1, 2, 3); fix partition_ids``.
    :param fix: what the caller should fix, the end of the message.
    """
    unknown = sorted(set(wanted) - set(partition_ids))
    if unknown:
        raise error(
            f"Event Hub {eventhub_name!r} has no partition {', '.join(unknown)} (it has {', '.join(partition_ids)}); "
            f"fix {fix}"
        )
