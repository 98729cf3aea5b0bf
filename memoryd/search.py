"""Keyword search over units: free text -> FTS5 expression -> ranked, labelled results."""

from __future__ import annotations

from memoryd.api import SearchRequest, SearchResponse, SearchResult
from memoryd.store import Store
from memoryd.store.fts import match_expression, query_terms, snippet
from memoryd.store.units import search_units


async def search(store: Store, req: SearchRequest) -> SearchResponse:
    terms = query_terms(req.query)
    match = match_expression(terms, req.mode)
    if match is None:
        return SearchResponse(total=0, shown=0, message="no searchable words in the query",
                              results=[])
    total, rows = await store.read(lambda c: search_units(
        c, match, limit=req.max_results, agent=req.agent, project=req.project,
        session_id=req.session_id))
    results = [
        SearchResult(
            unit_id=r["unit_id"], record_id=r["record_id"], agent=r["agent"],
            session_id=r["session_id"], project=r["project"], role=r["role"], kind=r["kind"],
            ts=r["ts"], turn=r["turn"], snippet=snippet(r["content"], terms),
            score=round(r["score"], 4), path=r["path"], offset=r["offset"])
        for r in rows
    ]
    return SearchResponse(total=total, shown=len(results),
                          message=f"{total} matches, showing {len(results)}", results=results)
