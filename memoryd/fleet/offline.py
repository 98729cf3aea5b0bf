"""Answering search and context while the shared database is unreachable.

Once the local index is ready, the rows search and context read are in this machine's
row cache (`memoryd.fleet.row_cache`), so answers stay complete, marked stale
(`cached_note`). While the index is still being built (the cache with it), the index
ranks what it holds but keeps no text (issue 11: the truth keeps it). For that case each
daemon remembers the hits it served last (`RecentHits`, a bounded cache by unit id, a
few MB), and a query is ranked by the index and answered with the ranked units whose
text it remembers, marked stale and saying how many more matched. Filters on session
attributes (agent, project, session) are applied to those remembered hits.
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


def offline_hits(index: Any, recent: RecentHits, query: str, *, k: int, mode: str = "or",
                 agent: str | None = None, project: str | None = None,
                 session_id: str | None = None,
                 exclude: frozenset[int] = frozenset()) -> tuple[int, list[Any]]:
    """(units the index matches, the best `k` of them whose text is remembered), ranked
    by the index alone. Runs without the database (call from a worker thread)."""
    from memoryd.index.query import Filters
    from memoryd.recall.retrieval import plan_query

    plan = plan_query(query, mode)
    if plan.match is None or k <= 0:
        return 0, []
    got = index.ranked(None, plan.terms, Filters(), mode=mode, limit=max(500, 50 * k),
                       count=True)
    if got is None:  # the index is rebuilding: nothing to rank with
        return 0, []
    total, cands = got[0], got[1]  # (matches, candidates[, whether matches is estimated])
    out = []
    for c in cands:
        h = recent.get(int(c["unit_id"]))
        if h is None or h.unit_id in exclude:
            continue
        if (agent and h.agent != agent) or (project and h.project != project) or (
                session_id and h.session_id != session_id):
            continue
        out.append(h)
        if len(out) >= k:
            break
    return total, out


def stale_note(health: dict[str, Any], total: int, shown: int) -> str:
    return (f"the store is unreachable since {health.get('unreachable_since')}: answered "
            f"from this machine's index (stale); {total} units match, {shown} shown (the "
            "ones whose text this daemon served recently)")


def cached_note(health: dict[str, Any]) -> str:
    return (f"stale: the store is unreachable since {health.get('unreachable_since')}; "
            "answered from this machine's index and row cache, as of the last change it "
            "applied")
