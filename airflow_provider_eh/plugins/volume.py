"""Events published per producer group over time, from the ledgers' history records, read a bounded amount per request.

Every committed batch has a history record under its ordinal, with its events and ``committed_at``
(:mod:`~airflow_provider_eh.publishing.state`). A ledger's records are read newest first, through the
store's public ``history``, until one was committed before the horizon (:data:`HORIZON`, the longest
window the trends show) or the oldest kept record; records are read in commit order, so their times
fall with their ordinals (a batch's time is its committing task's clock).

A record never changes once written, so what a ledger's records add up to is kept per
:data:`BUCKET_SECONDS` bucket in the API server (:class:`LedgerVolume`, a few hundred numbers per
ledger), with the ordinals read: a later request reads only the batches committed since, and the
older ones still unread. Each request reads at most ``budget`` records in all (:data:`READ_BUDGET`),
new batches first, and starts no ledger's reads after :data:`READ_SECONDS`, the ledgers read longest
ago first; a ledger whose records are not all read yet says so (``complete``: false) and the next
request goes on from there. The view's sampler, when on, reads the same way in the
background, so the history is read before anyone asks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.readers.ledgers import blob_states, read_states
from airflow_provider_eh.plugins.readers.reading import Reading
from airflow_provider_eh.plugins.redaction import log_failure
from airflow_provider_eh.publishing.document import StateKey
from airflow_provider_eh.publishing.records import parse_time

BUCKET_SECONDS = 300
HORIZON = timedelta(hours=25)
READ_BUDGET = 4000
#: a request starts no ledger's reads after this many seconds of reading history records
READ_SECONDS = 1.0
PAGE = 1000  # the most records one ``history`` call reads
STATE_THREADS = 16
LEDGER_THREADS = 2  # each ``history`` call reads its page 16 records at a time
CACHED_LEDGERS = 8192

_LEDGERS = Cache(None, CACHED_LEDGERS)


@dataclass
class LedgerVolume:
    """What one ledger's records read so far add up to: ordinals ``low..top-1`` are read, ``done`` once the
    older end is reached; ``buckets`` maps a bucket's start (epoch seconds) to ``[events, batches]``."""

    top: int
    low: int
    done: bool = False
    buckets: dict[int, list[int]] = field(default_factory=dict)
    read_at: float = 0.0  # when a request last read this ledger (monotonic): the ledgers read longest ago go first
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, records: Iterable[Any], horizon: datetime) -> bool:
        """Count ``records`` committed at or after ``horizon``; ``True`` when one of them is older (the end is reached)."""
        older = False
        for record in records:
            moment = parse_time(record.committed_at)
            if moment is None:
                continue
            if moment < horizon:
                older = True
                continue
            stamp = int(moment.timestamp())
            slot = self.buckets.setdefault(stamp - stamp % BUCKET_SECONDS, [0, 0])
            slot[0] += int(record.events)
            slot[1] += 1
        return older

    def forget_before(self, horizon: datetime) -> None:
        cut = horizon.timestamp()
        for stamp in [s for s in self.buckets if s + BUCKET_SECONDS <= cut]:
            del self.buckets[stamp]

    def update(self, store: Any, key: Any, state: Any, share: int, horizon: datetime, deadline: float) -> int | None:
        """Read through ``store`` what :func:`plan` picks of this ledger's records (``share`` at most) and count them;
        the number of records read, or ``None`` when reads would start after ``deadline`` (left for the next request)."""
        ledger = state.ledger
        with self.lock:
            new, older, restart = plan(self.top, self.low, self.done, ledger.first, ledger.next, share)
            if (new or older or restart) and time.monotonic() > deadline:
                return None
            self.read_at = time.monotonic()
            if restart:  # start again from the newest record, as from a ledger never read
                self.buckets.clear()
                self.top = self.low = ledger.next
                self.done = False
                new, older = range(0), new
            read = 0
            for before, limit in _pages(new):
                self.add(store.history(key, before=before, limit=limit, state=state).batches, horizon)
                read += limit
            self.top = max(self.top, new.stop)
            for before, limit in _pages(older):
                reached = self.add(store.history(key, before=before, limit=limit, state=state).batches, horizon)
                read += limit
                self.low = before - limit
                if reached:
                    self.done = True
                    break
            if self.low <= ledger.first:
                self.done = True
            self.forget_before(horizon)
            return read


def _pages(ordinals: range) -> Iterator[tuple[int, int]]:
    """``(before, limit)`` of the ``history`` calls that read ``ordinals``, newest first, :data:`PAGE` at most each."""
    for stop in range(ordinals.stop, ordinals.start, -PAGE):
        yield stop, min(PAGE, stop - ordinals.start)


def plan(top: int, low: int, done: bool, first: int, next_ordinal: int, budget: int) -> tuple[range, range, bool]:
    """Which ordinals to read for a ledger known from ``low`` to ``top - 1`` whose records are now ``first`` to
    ``next_ordinal - 1``, ``budget`` at most: the new ones (all of them, or a restart from the newest when
    they alone exceed the budget), then older ones down from ``low``. Returns ``(new, older, restart)``."""
    if next_ordinal < top or next_ordinal - top > budget:  # a ledger reset, or more new batches than a request reads
        newest = range(max(first, next_ordinal - budget), next_ordinal)
        return newest, range(0), True
    new = range(top, next_ordinal)
    left = budget - len(new)
    floor = max(first, low - left)
    older = range(floor, low) if not done and left > 0 and low > first else range(0)
    return new, older, False


def published_volume(reading: Reading, now: datetime, since: datetime, bucket_seconds: int,
                     budget: int = READ_BUDGET, read_seconds: float = READ_SECONDS) -> dict[str, Any]:
    """Events and batches committed per producer group and ``bucket_seconds`` bucket from ``since`` to ``now``.

    :param budget: the most history records read by this call.
    :param read_seconds: this many seconds after the call started (its producer states' reads included), it
        starts no other ledger's reads: the first answer after a start, which downloads every state, reads
        its records at the next.
    """
    deadline = time.monotonic() + read_seconds
    found = blob_states(reading)
    if found is None:
        return {"bucket_seconds": bucket_seconds, "producer_groups": [], "complete": True, "records_read": 0}
    container, store, blobs = found
    horizon = now - HORIZON
    states = _readable_states(reading, container, store, blobs)
    share = max(1, budget // max(1, len(states)))
    where = (str(getattr(container, "url", "")), reading.source.state_container)
    entries = [(key, state, _kept(where, key, state)) for key, state in states]
    entries.sort(key=lambda item: item[2].read_at)  # the ledgers read longest ago (or never) first

    def update(item: tuple[Any, Any, LedgerVolume]) -> tuple[str, LedgerVolume, int | None]:
        key, state, entry = item
        return state.group, entry, entry.update(store, key, state, share, horizon, deadline)

    with ThreadPoolExecutor(LEDGER_THREADS) as pool:
        updated = list(pool.map(update, entries))
    return _per_group(updated, since, bucket_seconds)


def _readable_states(reading: Reading, container: Any, store: Any, blobs: list[Any]) -> list[tuple[Any, Any]]:
    """``(state key, state)`` of the producer states in ``container`` that could be read: one unreadable ledger must
    not hide the others (the overview names it)."""
    endpoint = reading.endpoint
    states = []
    for blob, state, exc in read_states(reading, container, store, blobs, STATE_THREADS):
        if exc is not None:
            log_failure(f"reading the producer state of {blob.group!r} partition {blob.partition} for the publish trend", exc)
        elif state is not None:
            states.append((StateKey.of(endpoint, blob.group, blob.partition), state))
    return states


def _kept(where: tuple[str, Any], key: Any, state: Any) -> LedgerVolume:
    """What this API server kept of the ledger of ``key`` in the container ``where``, or a new one from its next ordinal."""
    volume: LedgerVolume = _LEDGERS.get((*where, key.blob_name), lambda: LedgerVolume(state.ledger.next, state.ledger.next))
    return volume


def _per_group(updated: list[tuple[str, LedgerVolume, int | None]], since: datetime, bucket_seconds: int) -> dict[str, Any]:
    """The answer: the ledgers' buckets from ``since`` added up per producer group and ``bucket_seconds``; complete
    when every ledger was read this time and to its end."""
    start = int(since.timestamp()) - int(since.timestamp()) % bucket_seconds
    groups: dict[str, dict[int, list[int]]] = {}
    complete = True
    for group, entry, read in updated:
        complete = complete and read is not None and entry.done
        totals = groups.setdefault(group, {})
        for stamp, (events, batches) in list(entry.buckets.items()):
            if stamp >= start:
                slot = totals.setdefault(stamp - stamp % bucket_seconds, [0, 0])
                slot[0] += events
                slot[1] += batches
    return {
        "bucket_seconds": bucket_seconds,
        "producer_groups": [
            {"group": group, "buckets": [[datetime.fromtimestamp(s, UTC).isoformat(), e, b]
                                         for s, (e, b) in sorted(totals.items())]}
            for group, totals in sorted(groups.items())
        ],
        "complete": complete,
        "records_read": sum(read or 0 for _, _, read in updated),
    }
