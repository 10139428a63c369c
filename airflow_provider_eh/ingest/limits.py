"""How far one ingestion run goes and how it shares a hub's partitions with other instances."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest.ownership import BALANCED, GREEDY

# What EventHubIngestOperator passes as batch_seconds to a SQL sink: a partition's events wait up to a quarter
# second for more. Each commit costs a few calls to the server, and each call hands the interpreter lock to the
# receiving thread and waits to win it back; gathering makes far fewer commits in a busy run (the figure:
# bench/README.md, "Design figures"); a bounded run's last batch of a partition is committed at once, at its
# target.
SQL_BATCH_SECONDS = 0.25
# ... and to a Delta sink: every commit is a log entry and at least one data file, so fewer, larger ones
DELTA_BATCH_SECONDS = 10.0


@dataclass(frozen=True)
class RunLimits:
    """
    How far one run goes and how it shares partitions.

    :param batch_size: events per SQL transaction at most; ``None``: bounded by ``batch_bytes`` and time only.
    :param max_wait_time: seconds to wait for a batch to fill: a partition's transaction takes what
        has arrived, so a busy partition gets large transactions and a quiet one small, prompt ones.
    :param batch_bytes: event bodies per SQL transaction at most (one event more than that never).
    :param max_events: stop after this many events (all partitions); ``None``: no limit.
    :param max_duration: stop after this many seconds; ``None``: no limit.
    :param ownership_expiry: seconds after which an unrenewed partition claim is abandoned.
    :param strategy: ``balanced`` (one claim per cycle) or ``greedy`` (the whole fair share at once).
    :param instances: how many instances share the hub (mapped task instances), if known.
    :param poll_interval: seconds between load-balancing cycles while waiting on other instances.
    :param partition_ids: restrict the run to these partitions.
    :param stall_timeout: seconds a pending partition may deliver nothing before the run fails
        (retryable) instead of waiting forever.
    :param upto: load each named partition up to this sequence number at most (or the hub's end, if
        lower) and leave out the partitions it does not name; ``None``: every partition to its end.
    :param batch_seconds: how long a partition's received events wait for more before they are committed,
        unless ``batch_size`` or ``batch_bytes`` is reached first; 0: commit what has arrived at once (a Delta
        table wants this higher: every commit is a log entry and at least one data file).
    :param checkpoint_interval: seconds between two writes of a partition's standard blob checkpoint
        while the run goes on (the SQL checkpoint moves with every batch; the blob with the newest of
        them, and at the end of the run with the last).
    :param lag_interval: seconds between two reads of the partitions' last enqueued sequence numbers, which
        each batch's lag is counted from (read first with the run's bounds; a management request per
        partition, on a thread of its own).
    """

    batch_size: int | None = None
    max_wait_time: float = 1.0
    batch_bytes: int = 4 * 1024 * 1024
    max_events: int | None = None
    max_duration: float | None = None
    ownership_expiry: float = 60.0
    strategy: str = BALANCED
    instances: int | None = None
    poll_interval: float = 1.0
    partition_ids: Sequence[str] | None = None
    stall_timeout: float = 120.0
    upto: Mapping[str, int] | None = None
    checkpoint_interval: float = 1.0
    batch_seconds: float = 0.0
    lag_interval: float = 5.0

    def __post_init__(self) -> None:
        if self.strategy not in (BALANCED, GREEDY):
            raise SinkConfigError(f"strategy {self.strategy!r} is not one of {BALANCED!r}, {GREEDY!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise SinkConfigError(f"batch_size must be at least 1 (or None: by bytes and time), not {self.batch_size}")
        if self.batch_bytes < 1:
            raise SinkConfigError(f"batch_bytes must be at least 1, not {self.batch_bytes}")
        if self.batch_seconds < 0:
            raise SinkConfigError(f"batch_seconds must be 0 or more seconds, not {self.batch_seconds}")
        if self.checkpoint_interval < 0:
            raise SinkConfigError(f"checkpoint_interval must be 0 (every batch) or more seconds, not {self.checkpoint_interval}")
        if not self.lag_interval > 0:
            raise SinkConfigError(f"lag_interval must be more than 0 seconds, not {self.lag_interval}")
