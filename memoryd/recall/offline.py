"""Answering search and context while the shared database is unreachable.

Once the local index is ready, the rows search and context read are in this machine's
row cache (`memoryd.fleet.row_cache`), so answers stay complete, marked stale
(`cached_note`). While the index is still being built (the cache with it), the index
ranks what it holds but keeps no text (issue 11: the truth keeps it). For that case each
daemon's index remembers the hits it served last (`memoryd.index.recent`, a bounded cache
by unit id, a few MB), and a query is ranked by the index and answered with the ranked units whose
text it remembers, marked stale and saying how many more matched. Filters on session
attributes (agent, project, session) are applied to those remembered hits.
"""

from __future__ import annotations

from typing import Any

from memoryd.index.protocol import Index
from memoryd.index.query import Filters
from memoryd.index.recent import RecentHits
from memoryd.recall.retrieval import plan_query

def offline_hits(index: Index, recent: RecentHits, query: str, *, k: int, mode: str = "or",
                 agent: str | None = None, project: str | None = None,
                 session_id: str | None = None,
                 exclude: frozenset[int] = frozenset()) -> tuple[int, list[Any]]:
    """(units the index matches, the best `k` of them whose text is remembered), ranked
    by the index alone. Runs without the database (call from a worker thread)."""
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
