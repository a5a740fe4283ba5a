"""A least-recently-used mapping with a bound on its entries, for what the
condition sandbox remembers by source (syntax-check results, evaluation
costs): a flood of distinct sources evicts the oldest, never grows memory."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """Thread-safe; `get` refreshes an entry, `put` evicts the least recently
    used entries beyond `max_entries`."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            try:
                self._entries.move_to_end(key)
            except KeyError:
                self.misses += 1
                return None
            self.hits += 1
            return self._entries[key]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
