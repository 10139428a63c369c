"""Each partition's last enqueued sequence number during a run, read from the hub every few seconds.

A batch's lag is how many events the hub holds after the batch's last one. The hub can send a
partition's last enqueued event with every delivery (the receiver runtime metric), but then every
message carries four more annotations, which the SDK's pure-Python AMQP decoder decodes event by
event, at a cost per event that ``bench/ingest.py`` measures (``bench/README.md``, "Design figures"). A run
reads the figure
instead with a partition-properties request per partition every ``lag_interval`` seconds, on a thread
of its own over the kept management link, starting from what the run read for its bounds. A batch's
lag is therefore as of at most ``lag_interval`` seconds before its commit.

A request that fails leaves the last figure in place (the lag is a report, not a bound) and is logged
once per run; the next interval tries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)


def last_enqueued(client: Any, partition_id: str) -> int:
    """The partition's last enqueued sequence number (``-1`` when it is empty), from a producer client."""
    props = client.get_partition_properties(partition_id)
    return -1 if props.get("is_empty") else int(props["last_enqueued_sequence_number"])


class HubEnds:
    """
    Per partition, the last enqueued sequence number the hub reported, refreshed by a background thread.

    :param read: ``read(partition_id)``: the partition's last enqueued sequence number now.
    :param first: per partition, the figure already read (the run's bounds): what :meth:`lag` answers
        with until the first refresh.
    :param interval: seconds between two refreshes of every partition.
    :param hub: the hub's name, for the log.
    """

    def __init__(self, read: Callable[[str], int], first: Mapping[str, int], interval: float, hub: str = ""):
        self._read = read
        self._ends = {str(p): int(seq) for p, seq in first.items()}
        self._interval = interval
        self._hub = hub
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned = False

    def start(self) -> HubEnds:
        if self._thread is None and self._ends:
            self._thread = threading.Thread(target=self._run, name="eh-hub-ends", daemon=True)
            self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop refreshing; a request in flight is waited for up to ``timeout`` seconds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def get(self, partition_id: str) -> int | None:
        """The partition's last enqueued sequence number as last read; ``None`` for a partition never read."""
        return self._ends.get(partition_id)

    def lag(self, partition_id: str, after: int) -> int | None:
        """Events enqueued after sequence number ``after`` as last read (0 when none; ``None``: unknown)."""
        end = self._ends.get(partition_id)
        return None if end is None else max(0, end - after)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            for partition_id in list(self._ends):
                if self._stop.is_set():
                    return
                try:
                    end = self._read(partition_id)
                except Exception as exc:  # a report, not a bound: the run goes on with the last figure
                    if not self._warned and not self._stop.is_set():
                        self._warned = True
                        log.warning("Could not refresh the last enqueued sequence number of partition %s of %r "
                                    "(lag figures stay as last read; retried every %.3g s): %s: %s",
                                    partition_id, self._hub, self._interval, type(exc).__name__, exc)
                    continue
                # a figure read before a later one never replaces it (the hub's end only moves forward)
                self._ends[partition_id] = max(end, self._ends[partition_id])
