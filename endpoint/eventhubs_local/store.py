"""Hubs, consumer groups and partitions on disk, with the metadata file that makes them persist.

``DATA_DIR/hubs.json`` lists every hub (partition count, consumer groups, creation time); each
partition's log lives in ``DATA_DIR/hubs/<hub>/<partition id>/``. Hub names are compared
case-insensitively, as in Event Hubs. A deleted hub leaves ``hubs.json`` first, then its folder goes;
a folder that ``hubs.json`` does not list (a deletion cut short) is removed when a hub of that name is
created, so a new hub never finds an old one's events.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .log import PartitionLog

_LOG = logging.getLogger(__name__)
DEFAULT_CONSUMER_GROUP = "$Default"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,255}$")
_GROUP_NAME = re.compile(r"^(\$Default|[A-Za-z0-9][A-Za-z0-9._\-]{0,49})$")
MAX_PARTITIONS = 1024


class StoreError(ValueError):
    """A request about hubs that cannot be honoured; ``status`` is the HTTP-like code."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status



def write_json(path: Path, data: object) -> None:
    """Write ``data`` as ``path`` atomically: a file beside it, flushed to disk, then renamed over it."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)

@dataclass
class Hub:
    """One hub: its partitions' logs, its consumer groups, and where an event without a partition goes."""

    name: str
    partition_count: int
    consumer_groups: list[str]
    created_at: int
    partitions: list[PartitionLog] = field(default_factory=list)
    round_robin: int = 0

    @property
    def partition_ids(self) -> list[str]:
        return [str(i) for i in range(self.partition_count)]

    def has_group(self, name: str) -> bool:
        return name.lower() in (g.lower() for g in self.consumer_groups)

    def partition(self, partition_id: str) -> PartitionLog | None:
        if not partition_id.isdigit():
            return None
        index = int(partition_id)
        return self.partitions[index] if 0 <= index < self.partition_count else None

    def place(self, partition_key: bytes | None) -> int:
        """Partition for an event sent to the hub: stable CRC-32 hash of the key, else round-robin."""
        if partition_key is not None:
            return zlib.crc32(partition_key) % self.partition_count
        index = self.round_robin % self.partition_count
        self.round_robin += 1
        return index

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "partitions": self.partition_count,
            "consumer_groups": list(self.consumer_groups),
            "created_at": self.created_at,
            "events": sum(p.next_seq - p.begin_seq for p in self.partitions),
        }


class Store:
    """Every hub of one data directory."""

    def __init__(self, data_dir: Path, *, segment_bytes: int = 64 * 1024 * 1024):
        self.data_dir = Path(data_dir)
        self.segment_bytes = segment_bytes
        self.hubs: dict[str, Hub] = {}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._load()

    @property
    def meta_path(self) -> Path:
        return self.data_dir / "hubs.json"

    def _load(self) -> None:
        if not self.meta_path.exists():
            return
        meta = json.loads(self.meta_path.read_text())
        for entry in meta.get("hubs", []):
            self._open_hub(entry["name"], entry["partitions"], entry["consumer_groups"], entry["created_at"])

    def _save(self) -> None:
        meta = {"hubs": [
            {"name": h.name, "partitions": h.partition_count, "consumer_groups": h.consumer_groups, "created_at": h.created_at}
            for h in self.hubs.values()
        ]}
        write_json(self.meta_path, meta)

    def _hub_dir(self, name: str) -> Path:
        return self.data_dir / "hubs" / name

    def _open_hub(self, name: str, partitions: int, groups: list[str], created_at: int) -> Hub:
        hub = Hub(name, partitions, groups, created_at)
        for index in range(partitions):
            hub.partitions.append(PartitionLog(self._hub_dir(name) / str(index), segment_bytes=self.segment_bytes))
        self.hubs[name.lower()] = hub
        return hub

    def get(self, name: str) -> Hub | None:
        return self.hubs.get(name.lower())

    def create_hub(self, name: str, partitions: int = 4, consumer_groups: list[str] | tuple[str, ...] = ()) -> tuple[Hub, bool]:
        """Create a hub (or add missing consumer groups to an existing one); returns ``(hub, created)``."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise StoreError(f"invalid hub name {name!r}: use letters, digits, '.', '-', '_' (max 256)")
        if not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS:
            raise StoreError(f"invalid partition count {partitions!r} for hub {name!r}: 1..{MAX_PARTITIONS}")
        for group in consumer_groups:
            self._check_group(group)
        existing = self.get(name)
        if existing is not None:
            if existing.partition_count != partitions:
                raise StoreError(
                    f"hub {name!r} exists with {existing.partition_count} partitions, not {partitions}", 409)
            for group in consumer_groups:
                self._add_group(existing, group)
            self._save()
            return existing, False
        groups = [DEFAULT_CONSUMER_GROUP] + [g for g in dict.fromkeys(consumer_groups) if g != DEFAULT_CONSUMER_GROUP]
        shutil.rmtree(self._hub_dir(name), ignore_errors=True)  # left by a deletion cut short: not this hub's
        hub = self._open_hub(name, partitions, groups, int(time.time() * 1000))
        self._save()
        _LOG.info("hub %s created with %d partitions, consumer groups %s", name, partitions, groups)
        return hub, True

    @staticmethod
    def _check_group(group: object) -> None:
        if not isinstance(group, str) or not _GROUP_NAME.match(group):
            raise StoreError(f"invalid consumer group name {group!r}")

    def _add_group(self, hub: Hub, group: str) -> None:
        if not hub.has_group(group):
            hub.consumer_groups.append(group)

    def add_consumer_group(self, hub_name: str, group: str) -> Hub:
        hub = self.get(hub_name)
        if hub is None:
            raise StoreError(f"hub {hub_name!r} does not exist", 404)
        self._check_group(group)
        self._add_group(hub, group)
        self._save()
        return hub

    def add_partitions(self, hub_name: str, partitions: object) -> Hub:
        """Raise a hub's partition count to ``partitions``, as the service's Premium and Dedicated tiers do on an
        existing hub: the new partitions start empty, the others keep their events; the count never goes down
        (409). Events sent to the hub (no partition, or a key) spread over every partition from then on."""
        hub = self.get(hub_name)
        if hub is None:
            raise StoreError(f"hub {hub_name!r} does not exist", 404)
        if not isinstance(partitions, int) or isinstance(partitions, bool) or not partitions <= MAX_PARTITIONS:
            raise StoreError(f"invalid partition count {partitions!r} for hub {hub_name!r}: up to {MAX_PARTITIONS}")
        if partitions < hub.partition_count:
            raise StoreError(f"hub {hub_name!r} has {hub.partition_count} partitions: a partition count can only grow, "
                             f"not to {partitions}", 409)
        for index in range(hub.partition_count, partitions):
            hub.partitions.append(PartitionLog(self._hub_dir(hub.name) / str(index), segment_bytes=self.segment_bytes))
        if partitions > hub.partition_count:
            _LOG.info("hub %s grows from %d to %d partitions", hub.name, hub.partition_count, partitions)
            hub.partition_count = partitions
            self._save()
        return hub

    def delete_hub(self, name: str) -> Hub:
        """Delete a hub with its consumer groups and events (404 if there is none): gone from
        ``hubs.json`` first, then its partitions are closed and their folder removed."""
        hub = self.get(name)
        if hub is None:
            raise StoreError(f"hub {name!r} does not exist", 404)
        del self.hubs[hub.name.lower()]
        self._save()
        for partition in hub.partitions:
            partition.close()
        shutil.rmtree(self._hub_dir(hub.name), ignore_errors=True)
        _LOG.info("hub %s deleted", hub.name)
        return hub

    def delete_consumer_group(self, hub_name: str, group: str) -> Hub:
        """Delete a consumer group of a hub (404 if either is missing); ``$Default`` goes only with its hub."""
        hub = self.get(hub_name)
        if hub is None:
            raise StoreError(f"hub {hub_name!r} does not exist", 404)
        if group.lower() == DEFAULT_CONSUMER_GROUP.lower():
            raise StoreError(f"the consumer group {DEFAULT_CONSUMER_GROUP!r} of hub {hub.name!r} cannot be deleted: "
                             "it goes only with the hub (delete the hub)", 400)
        if not hub.has_group(group):
            raise StoreError(f"consumer group {group!r} does not exist on hub {hub.name!r}", 404)
        hub.consumer_groups = [g for g in hub.consumer_groups if g.lower() != group.lower()]
        self._save()
        _LOG.info("consumer group %s of hub %s deleted", group, hub.name)
        return hub

    def partitions(self) -> list[PartitionLog]:
        return [p for h in self.hubs.values() for p in h.partitions]

    def close(self) -> None:
        for partition in self.partitions():
            partition.close()
