"""The hits a daemon served last, by unit id: what its index can answer from while the
truth is unreachable and the row cache is not built yet (`memoryd.recall.offline`).

Kept by the index that answers (`SearchIndex.recent`): a fleet index remembers up to
`RECENT_LIMIT` hits; a local one none (an SQLite file is never unreachable, and 5,000 hits
with their rows held ~14 MB at rest after 1,000 distinct searches at 1M units:
bench/README, `smmap`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

RECENT_LIMIT = 5000


class RecentHits:
    """The last hits served, by unit id (thread-safe: filled from the store's readers'
    results on the loop, read on a worker thread)."""

    def __init__(self, limit: int = RECENT_LIMIT) -> None:
        self.limit = limit
        self._hits: OrderedDict[int, Any] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, hits: list[Any]) -> None:
        with self._lock:
            for h in hits:
                self._hits[h.unit_id] = h
                self._hits.move_to_end(h.unit_id)
            while len(self._hits) > self.limit:
                self._hits.popitem(last=False)

    def forget(self, unit_ids: set[int] | None = None) -> None:
        """Drop these units (all with None): forgotten units must not come back offline."""
        with self._lock:
            if unit_ids is None:
                self._hits.clear()
            for u in unit_ids or ():
                self._hits.pop(u, None)

    def get(self, unit_id: int) -> Any:
        with self._lock:
            return self._hits.get(unit_id)

    def __len__(self) -> int:
        return len(self._hits)
