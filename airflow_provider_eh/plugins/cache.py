"""A small thread-safe cache for what the Event Hubs view may share between requests."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

V = TypeVar("V")


class Cache:
    """A small thread-safe cache: entries expire after ``ttl`` seconds (``None``: never), the least recently
    used go beyond ``size``; one load per key at a time (concurrent requests for a key wait for it)."""

    def __init__(self, ttl: float | None, size: int):
        self.ttl, self.size = ttl, size
        self._items: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}

    def _fresh(self, key: Hashable) -> tuple[bool, Any]:
        with self._lock:
            item = self._items.get(key)
            if item is None or (self.ttl is not None and time.monotonic() - item[0] > self.ttl):
                return False, None
            self._items.move_to_end(key)
            return True, item[1]

    def get(self, key: Hashable, load: Callable[[], V]) -> V:
        hit, value = self._fresh(key)
        if hit:
            return value
        with self._lock:
            gate = self._loading.setdefault(key, threading.Lock())
        with gate:
            hit, value = self._fresh(key)
            if hit:
                return value
            value = load()
            self.put(key, value)
            return value

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = (time.monotonic(), value)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            self._loading.pop(key, None)

    def peek(self, key: Hashable) -> tuple[bool, Any]:
        return self._fresh(key)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
