"""Where the Event Hubs view keeps its lag samples: one small blob per hub and time bucket, bounded in number.

A sample is every consumer group's lag on every partition of one hub at one moment, as the view
computes it (:func:`~airflow_provider_eh.plugins.readers.consumers.consumer_groups`). It is written to
``"_samples/{namespace}/{hub}/lag/{bucket}"`` (lower-cased; ``{bucket}`` the bucket's start in UTC,
``20261128T0930Z``, so names sort in time order) in the hub's checkpoint container or the one
``[azure_event_hubs] lag_samples_container`` names, with ``if_none_match="*"``: the first API server
to sample a bucket writes it, any other finds it written and leaves it. Checkpoint stores list
``{namespace}/{hub}/{group}/``, so the samples never show as a consumer group.

The store stays bounded: whoever writes a bucket deletes the buckets older than the retention, so a
hub keeps at most ``retention / interval + 1`` blobs (1,501 at the defaults: 1-minute buckets for 25 h),
each about 16 bytes per consumer group and partition. A written bucket never changes, so the samples
read are kept in memory, decoded (:data:`CACHED_BLOBS` of them), and a request downloads and decodes
only the new ones.

The functions at the top are pure (bucketing, names, pruning, thinning a series for a chart); the
:class:`SampleStore` does the blob calls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.readers.reading import partition_sort_key

PREFIX = "_samples"
LAG = "lag"
BUCKET_FORMAT = "%Y%m%dT%H%MZ"
READ_THREADS = 16
CACHED_BLOBS = 16384
#: a lag series holds at most this many points: longer ones are thinned to the highest lag of each step
MAX_POINTS = 360

_BLOBS = Cache(None, CACHED_BLOBS)  # (account url, container, blob name) -> the decoded sample: a bucket never changes


def bucket_start(moment: datetime, interval: float) -> datetime:
    """The start of the ``interval``-second bucket holding ``moment`` (buckets start at whole multiples since the epoch)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    stamp = moment.timestamp()
    return datetime.fromtimestamp(stamp - stamp % interval, UTC)


def hub_prefix(namespace: str, hub: str) -> str:
    """Where one hub's lag samples live, ending in ``/``."""
    return f"{PREFIX}/{namespace}/{hub}/{LAG}/".lower()


def blob_name(namespace: str, hub: str, bucket: datetime) -> str:
    """The blob of one bucket of one hub."""
    return hub_prefix(namespace, hub) + bucket.astimezone(UTC).strftime(BUCKET_FORMAT).lower()


def bucket_of(name: str) -> datetime | None:
    """The bucket a sample blob's name stands for (``None`` for a name that is not a sample's)."""
    try:
        return datetime.strptime(name.rsplit("/", 1)[-1].upper(), BUCKET_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def expired(names: Iterable[str], now: datetime, retention: timedelta) -> list[str]:
    """The sample blobs among ``names`` whose bucket is older than ``retention`` at ``now``."""
    cut = now - retention
    return [n for n in names if (b := bucket_of(n)) is not None and b < cut]


def encode(moment: datetime, interval: float, consumer_groups: Sequence[Mapping[str, Any]]) -> bytes:
    """A sample's blob: when it was taken, the interval, and ``[lag in events, lag in seconds]`` per group and partition."""
    doc = {
        "v": 1, "at": moment.astimezone(UTC).isoformat(), "interval": interval,
        "groups": {g["consumer_group"]: {p["partition"]: [p["lag_events"], p["lag_seconds"]] for p in g["partitions"]}
                   for g in consumer_groups},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Sample:
    """One decoded sample: its bucket, when it was taken, and ``group -> partition -> (events, seconds)``."""

    bucket: datetime
    at: datetime
    groups: dict[str, dict[str, tuple[int, float | None]]]

    @classmethod
    def decode(cls, bucket: datetime, data: bytes) -> Sample:
        doc = json.loads(data)
        groups = {g: {p: (int(v[0]), None if v[1] is None else float(v[1])) for p, v in parts.items()}
                  for g, parts in doc["groups"].items()}
        return cls(bucket, datetime.fromisoformat(doc["at"]), groups)


def step_for(window: timedelta, interval: float, max_points: int = MAX_POINTS) -> float:
    """The step of a chart's points: the interval, or a whole multiple of it that keeps a series to ``max_points``."""
    return interval * max(1, math.ceil(window.total_seconds() / interval / max_points))


def lag_series(samples: Iterable[Sample], step: float) -> list[dict[str, Any]]:
    """Per consumer group and partition, ``[time, events, seconds]`` points in time order, one per ``step``: the
    sample with the highest lag in events of the step (so a short peak is not thinned away)."""
    # group -> partition -> step slot -> (sample's time, events, seconds); the earliest sample wins a tie
    best: dict[str, dict[str, dict[datetime, tuple[datetime, int, float | None]]]] = {}
    for sample in sorted(samples, key=lambda s: s.bucket):
        slot = bucket_start(sample.bucket, step)
        at = sample.at
        for group, partitions in sample.groups.items():
            series = best.get(group)
            if series is None:
                series = best[group] = {}
            for partition, (events, seconds) in partitions.items():
                points = series.get(partition)
                if points is None:
                    series[partition] = {slot: (at, events, seconds)}
                    continue
                kept = points.get(slot)
                if kept is None or events > kept[1]:
                    points[slot] = (at, events, seconds)
    times: dict[datetime, str] = {}  # a sample's time is written once, however many series hold it

    def text(at: datetime) -> str:
        written = times.get(at)
        if written is None:
            written = times[at] = at.astimezone(UTC).isoformat()
        return written

    return [
        {"consumer_group": group, "partitions": [
            {"partition": partition,
             "points": [[text(at), events, seconds] for at, events, seconds in
                        (points[slot] for slot in sorted(points))]}
            for partition, points in sorted(series.items(), key=lambda item: partition_sort_key(item[0]))]}
        for group, series in sorted(best.items(), key=lambda item: item[0].lower())
    ]


class SampleStore:
    """The lag samples of one hub in one container: write a bucket once, read a window, prune the old ones."""

    def __init__(self, container: Any, namespace: str, hub: str):
        self.container = container
        self.prefix = hub_prefix(namespace, hub)
        self.namespace, self.hub = namespace, hub

    def _cache_key(self, name: str) -> tuple[str, str, str]:
        return (str(getattr(self.container, "url", "")), str(getattr(self.container, "container_name", "")), name)

    def names(self) -> list[str]:
        """The hub's sample blobs, oldest first (one listing: 5,000 names a page)."""
        return sorted(b.name for b in self.container.list_blobs(name_starts_with=self.prefix))

    def has(self, bucket: datetime) -> bool:
        """Whether the bucket is sampled already (by this or another API server)."""
        return bool(self.container.get_blob_client(blob_name(self.namespace, self.hub, bucket)).exists())

    def write(self, bucket: datetime, data: bytes) -> bool:
        """Write a bucket unless it exists: ``True`` when this call wrote it."""
        from azure.core.exceptions import ResourceExistsError

        name = blob_name(self.namespace, self.hub, bucket)
        try:
            self.container.get_blob_client(name).upload_blob(data, overwrite=False)
        except ResourceExistsError:
            return False
        _BLOBS.put(self._cache_key(name), Sample.decode(bucket, data))
        return True

    def prune(self, now: datetime, retention: timedelta) -> int:
        """Delete the buckets older than ``retention`` at ``now``; how many were deleted."""
        from azure.core.exceptions import ResourceNotFoundError

        gone = 0
        for name in expired(self.names(), now, retention):
            try:
                self.container.delete_blob(name)
                gone += 1
            except ResourceNotFoundError:  # another API server pruned it first
                pass
        return gone

    def read(self, since: datetime, until: datetime) -> list[Sample]:
        """The samples of the buckets from ``since`` to ``until``: one listing, and a download of each bucket not read before."""
        wanted = [(n, b) for n in self.names() if (b := bucket_of(n)) is not None and since <= b <= until]

        def load(item: tuple[str, datetime]) -> Sample:
            name, bucket = item
            sample: Sample = _BLOBS.get(
                self._cache_key(name), lambda: Sample.decode(bucket, self.container.download_blob(name).readall()))
            return sample

        with ThreadPoolExecutor(READ_THREADS) as pool:
            return list(pool.map(load, wanted))
