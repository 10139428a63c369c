"""The view's lag sampler: a thread in the API server that samples the lag of the hubs the view has shown.

Off unless ``[azure_event_hubs] lag_sampling = True``: the view then writes nothing. When on, every
hub a user has opened in the view (the trends' API, behind the view's authorisation) is sampled
every ``lag_sample_interval`` seconds, for ``lag_sample_retention_hours`` after it was last opened:
the lag of every consumer group with checkpoints on every partition, computed as the view computes
it, goes to one blob per bucket (:mod:`~airflow_provider_eh.plugins.samples`, created only if absent,
so several API servers or workers write a bucket once) and, from the one that wrote it, to the
``eventhubs.checkpoint.lag`` metric. The same pass reads the producer ledgers' new history records
(:mod:`~airflow_provider_eh.plugins.volume`), so the publish trend is read before anyone asks.

The thread starts when the first hub is watched and stops when the API server's process exits
(:func:`stop_sampler`, registered with ``atexit``). Every time it uses is passed in: tests sample any
bucket they like without waiting for it.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from airflow_provider_eh import metrics
from airflow_provider_eh.errors import ViewReadError
from airflow_provider_eh.plugins.readers.reading import Reading, Source
from airflow_provider_eh.plugins.redaction import log_failure
from airflow_provider_eh.plugins.samples import SampleStore, bucket_start, encode

log = logging.getLogger(__name__)

SECTION = "azure_event_hubs"
MIN_INTERVAL = 10.0
MIN_RETENTION_HOURS = 1.0
MIN_HISTORY_READ_SECONDS = 0.1
#: the sampler reads history in the background: longer than an answer may
SAMPLER_READ_SECONDS = 10.0
#: how long after a bucket starts it is sampled: a refresh of the partition properties fits in between
SAMPLE_OFFSET = 1.0


@dataclass(frozen=True)
class SamplingSettings:
    """``[azure_event_hubs]``'s options for the trends (sampling, and how long an answer reads history), checked."""

    enabled: bool = False
    interval: float = 60.0
    retention: timedelta = timedelta(hours=25)
    container: str | None = None  # None: the hub's checkpoint container
    history_read_seconds: float = 1.0  # an answer starts no ledger's history reads after this

    @classmethod
    def from_conf(cls) -> SamplingSettings:
        """The options as the API server's configuration sets them; a bad value raises :class:`ViewReadError` naming it."""
        from airflow.configuration import conf

        def number(option: str, default: float, least: float) -> float:
            raw = conf.get(SECTION, option, fallback=str(default))
            try:
                value = float(raw)
            except ValueError:
                value = float("nan")
            if not value >= least:
                raise ViewReadError(f"[{SECTION}] {option} = {raw!r}: give a number of at least {least:g}", 400)
            return value

        enabled = conf.get(SECTION, "lag_sampling", fallback="False").strip().lower()
        if enabled not in ("true", "false", "1", "0", "t", "f"):
            raise ViewReadError(f"[{SECTION}] lag_sampling = {enabled!r}: give True or False", 400)
        return cls(
            enabled=enabled in ("true", "1", "t"),
            interval=number("lag_sample_interval", 60.0, MIN_INTERVAL),
            retention=timedelta(hours=number("lag_sample_retention_hours", 25.0, MIN_RETENTION_HOURS)),
            container=conf.get(SECTION, "lag_samples_container", fallback="").strip() or None,
            history_read_seconds=number("view_history_read_seconds", 1.0, MIN_HISTORY_READ_SECONDS),
        )

    def container_of(self, source: Source) -> str | None:
        """Where ``source``'s samples live."""
        return self.container or source.checkpoint_container

    def describe(self) -> dict[str, object]:
        return {"enabled": self.enabled, "interval_seconds": self.interval,
                "retention_hours": self.retention.total_seconds() / 3600}


def sampled(source: Source) -> Source:
    """What the sampler reads of a source the view was asked about: every consumer group, no sink."""
    return replace(source, consumer_groups=(), sql_conn_id=None, sink_consumer_group="$Default", sink_prefix=None)


def sample_store(reading: Reading, settings: SamplingSettings) -> SampleStore | None:
    """The sample store of ``reading``'s hub (``None`` without a container to keep samples in)."""
    container = settings.container_of(reading.source)
    if not container:
        return None
    endpoint = reading.endpoint
    return SampleStore(reading.container(container), endpoint.namespace, endpoint.eventhub_name)


def sample(source: Source, settings: SamplingSettings, now: datetime) -> bool:
    """Sample ``source``'s lag into the bucket of ``now`` unless that bucket is sampled already; prune the
    buckets past the retention after writing one. ``True`` when this call wrote the bucket."""
    from airflow_provider_eh.plugins.readers.consumers import consumer_groups
    from airflow_provider_eh.plugins.readers.partitions import partition_properties

    reading = Reading(sampled(source))
    store = sample_store(reading, settings)
    if store is None or not reading.source.checkpoint_container:
        return False
    bucket = bucket_start(now, settings.interval)
    if store.has(bucket):
        return False
    groups = consumer_groups(reading, partition_properties(reading), now)
    if not store.write(bucket, encode(now, settings.interval, groups)):
        return False
    hub = reading.endpoint.eventhub_name
    for group in groups:
        for row in group["partitions"]:
            metrics.checkpoint_lag(hub, group["consumer_group"], row["partition"], row["lag_events"])
    gone = store.prune(now, settings.retention)
    log.info("Event Hubs view: sampled the lag of hub %s into bucket %s (%d consumer groups; %d old buckets pruned)",
             hub, bucket.isoformat(), len(groups), gone)
    return True


class Sampler:
    """The sampling thread: the hubs watched, and a pass over them at the start of every bucket."""

    def __init__(self, settings: SamplingSettings, clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.settings = settings
        self.clock = clock
        self._watched: dict[Source, datetime] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, source: Source, now: datetime | None = None) -> None:
        """Sample ``source`` from now on, until ``retention`` after the last call for it; starts the thread."""
        with self._lock:
            self._watched[sampled(source)] = now or self.clock()
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._run, name="eh-view-sampler", daemon=True)
                self._thread.start()
        self._wake.set()

    def watched(self) -> list[Source]:
        with self._lock:
            return list(self._watched)

    def run_once(self, now: datetime) -> int:
        """One pass at ``now``: sample every hub watched within the retention, forget the others; buckets written."""
        from airflow_provider_eh.plugins.volume import BUCKET_SECONDS, HORIZON, published_volume

        with self._lock:
            for source in [s for s, seen in self._watched.items() if now - seen > self.settings.retention]:
                del self._watched[source]
            sources = list(self._watched)
        written = 0
        for source in sources:
            if self._stopping.is_set():
                break
            try:
                written += sample(source, self.settings, now)
                if source.state_container:
                    published_volume(Reading(source), now, now - HORIZON, BUCKET_SECONDS,
                                     read_seconds=max(self.settings.history_read_seconds, SAMPLER_READ_SECONDS))
            except ViewReadError as exc:
                log.warning("Event Hubs view: sampling hub %s of connection %r: %s", source.eventhub_name,
                            source.event_hubs_conn_id, exc.message)
            except Exception as exc:  # a hub that cannot be read must not stop the others
                log_failure(f"sampling the lag of hub {source.eventhub_name!r} (connection {source.event_hubs_conn_id!r})", exc)
        return written

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            self.run_once(self.clock())
            now = self.clock().timestamp()
            wait = self.settings.interval - now % self.settings.interval + SAMPLE_OFFSET
            self._wake.wait(wait)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the thread after the pass it is in (waits ``timeout`` seconds at most)."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)


_SAMPLER: Sampler | None = None
_SAMPLER_LOCK = threading.Lock()


def watch(source: Source, settings: SamplingSettings) -> None:
    """Have the API server's sampler sample ``source`` (when ``settings`` turn sampling on)."""
    global _SAMPLER
    if not settings.enabled:
        return
    with _SAMPLER_LOCK:
        if _SAMPLER is None:
            _SAMPLER = Sampler(settings)
            atexit.register(stop_sampler)
        sampler = _SAMPLER
    sampler.watch(source)


def stop_sampler() -> None:
    """Stop the API server's sampler, if it runs."""
    global _SAMPLER
    with _SAMPLER_LOCK:
        sampler, _SAMPLER = _SAMPLER, None
    if sampler is not None:
        sampler.stop()
