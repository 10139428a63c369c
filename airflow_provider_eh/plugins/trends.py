"""The view's trends: lag per consumer group and partition, and events published per producer group, over time.

``GET /eventhubs/api/trends`` (:mod:`~airflow_provider_eh.plugins.routes.trends`: the same query
parameters, authorisation and scrubbing as the other API routes, plus ``hours``, up to 25, default 24)
answers with

- ``lag``: per consumer group and partition, ``[time, lag in events, lag in seconds]`` points from
  the samples kept (:mod:`~airflow_provider_eh.plugins.samples`), one per ``step_seconds`` at most
  (the sample with the highest lag of each step), when the request names a checkpoint container;
- ``published``: per producer group, ``[bucket start, events, batches]`` per ``bucket_seconds``, from
  the ledgers' history records (:mod:`~airflow_provider_eh.plugins.volume`), when it names a state
  container; ``complete`` is false while older records are still to be read;
- ``sampling``: whether this API server samples, its interval and retention.

When sampling is on, the request has the API server's sampler watch its hub
(:mod:`~airflow_provider_eh.plugins.sampler`).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.readers.reading import CONTAINER_HINT, Reading, iso, read_failure
from airflow_provider_eh.plugins.sampler import SamplingSettings, sample_store
from airflow_provider_eh.plugins.samples import lag_series, step_for
from airflow_provider_eh.plugins.volume import BUCKET_SECONDS, published_volume

MAX_HOURS = 25.0
#: the publish trend's bars: whole multiples of the volume's buckets, at most this many in a window
MAX_BARS = 96


def bar_seconds(window: timedelta) -> int:
    """The width of the publish trend's bars for ``window``: a whole multiple of the kept buckets."""
    buckets = max(1, -(-int(window.total_seconds()) // (BUCKET_SECONDS * MAX_BARS)))
    return BUCKET_SECONDS * buckets


#: the lag series of a window's samples, kept while the window holds the same ones (a sample never changes):
#: thinning a day of one-minute samples of 320 series is 460,000 values, redone only when a sample comes or goes
_SERIES = Cache(None, 64)


def window_series(store: Any, samples: list[Any], step: float) -> list[dict[str, Any]]:
    """:func:`~airflow_provider_eh.plugins.samples.lag_series` of ``samples`` (read from ``store``), kept for the
    same samples and step."""
    where = (str(getattr(getattr(store, "container", None), "url", "")), getattr(store, "prefix", ""))
    key = (*where, step, tuple(sample.bucket for sample in samples))
    series: list[dict[str, Any]] = _SERIES.get(key, lambda: lag_series(samples, step))
    return series


def _lag(reading: Reading, settings: SamplingSettings, window: timedelta, since: datetime, now: datetime,
         timings: dict[str, float]) -> dict[str, Any]:
    """The lag series of the window from the samples kept for ``reading``'s hub."""
    begin = time.perf_counter()
    store = sample_store(reading, settings)
    step = step_for(window, settings.interval)
    container = settings.container_of(reading.source)
    try:
        samples = store.read(since, now) if store is not None else []
    except Exception as exc:
        raise read_failure(f"reading lag samples in container {container!r} (connection {reading.source.wasb_conn_id!r})",
                           exc, reading.blob_site(str(container), "lag_samples_container", "checkpoints"),
                           CONTAINER_HINT) from None
    timings["lag"] = round(time.perf_counter() - begin, 3)
    return {"step_seconds": step, "samples": len(samples), "consumer_groups": window_series(store, samples, step)}


def trends(reading: Reading, settings: SamplingSettings, now: datetime, hours: float) -> dict[str, Any]:
    """The trends of ``reading``'s hub over the ``hours`` before ``now``."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
    window = timedelta(hours=hours)
    since = now - window
    endpoint = reading.endpoint
    window_bars = bar_seconds(window)

    def volume() -> dict[str, Any]:
        begin = time.perf_counter()
        try:
            return published_volume(reading, now, since, window_bars, read_seconds=settings.history_read_seconds)
        finally:
            timings["published"] = round(time.perf_counter() - begin, 3)

    with ThreadPoolExecutor(1) as pool:  # the producer states and their history beside the lag samples
        pending = pool.submit(volume)
        lag = _lag(reading, settings, window, since, now, timings) if reading.source.checkpoint_container else None
        published = pending.result()
    return {
        "namespace": endpoint.namespace,
        "hub": endpoint.eventhub_name,
        "read_at": iso(now),
        "since": iso(since),
        "hours": hours,
        "sampling": settings.describe(),
        "lag": lag,
        "published": published,
        "elapsed_seconds": round(time.perf_counter() - started, 3),
        "timings": timings,
    }
