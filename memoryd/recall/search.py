"""Keyword search over units: free text -> ranked, labelled results (`memoryd.recall.retrieval`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memoryd.recall import archived as archive_recall
from memoryd.api import SearchRequest, SearchResponse, SearchResult
from memoryd.embed import Embedder, vector_query
from memoryd.errors import StoreUnavailableError
from memoryd.runtime.idle_release import RELEASE
from memoryd.index.protocol import Index
from memoryd.index.text import snippet
from memoryd.recall.offline import cached_note, offline_hits, stale_note
from memoryd.recall.retrieval import Hit, Retrieval, plan_query, retrieve_sync
from memoryd.recall.rows import read_rows
from memoryd.store import Store


async def search(store: Store, req: SearchRequest, archive_dir: Path | None = None,
                 embed: Embedder | None = None) -> SearchResponse:
    """`archive_dir`: what retention moved there fills a page the index does not
    (memoryd.recall.archived). `embed`: local embeddings when on (`memoryd.embed`): the
    units nearest the query by meaning join the lexical ranking; None: it is lexical."""
    RELEASE.touch()
    # the search index the daemon built and handed the store to wake after writes
    # (`memoryd.daemon.store_index`); the server passes the store alone
    index = store.index
    # the index's helper takes this search's parts only while no other search or
    # context runs (`memoryd.index.helper`)
    with index.helper.asking():
        resp = await _search(store, index, req, embed)
        if archive_dir is None or resp.stale or resp.shown >= req.max_results:
            return resp
        return await _with_archive(resp, req, archive_dir)


async def _with_archive(resp: SearchResponse, req: SearchRequest,
                        archive_dir: Path) -> SearchResponse:
    terms = plan_query(req.query, req.mode).terms
    total, found = await asyncio.to_thread(
        archive_recall.find, archive_dir, terms, req.mode, req.max_results - resp.shown,
        agent=req.agent, project=req.project, session_id=req.session_id)
    if not total:
        return resp
    results = [*resp.results, *(_result(archive_recall.result(r)) for r in found)]
    message = (f"{resp.total + total} matches, showing {len(results)} ({total} in the "
               "archive: memoryctl archive restore ID brings a session back)")
    return SearchResponse(total=resp.total + total, shown=len(results), message=message,
                          results=results)


async def _search(store: Store, index: Index, req: SearchRequest,
                  embed: Embedder | None) -> SearchResponse:
    # the units nearest the query by meaning, asked on the reader thread; None: the
    # ranking is lexical
    vq = vector_query(embed, req.query)

    def answer(c: Any) -> tuple[Retrieval, list[SearchResult]]:
        # the results are built here too, on the reader thread: the event loop only
        # sends them (snippets of long tool outputs are not the loop's work)
        r = retrieve_sync(c, index, req.query, k=req.max_results, mode=req.mode,
                          agent=req.agent, project=req.project, session_id=req.session_id,
                          count=True, vq=vq)
        index.recent.remember(r.hits)
        return r, _results(r.hits, r.plan.terms)

    try:  # fleet mode: the rows from this machine's row cache once the index is ready
        (r, results), stale = await read_rows(store, index, answer)
    except StoreUnavailableError:  # fleet mode, the database away, the index rebuilding
        return await _stale(store, index, req)
    if r.plan.match is None:
        return SearchResponse(total=0, shown=0, message="no searchable words in the query",
                              results=[])
    message = _message(r.total, len(results), sum(len(h.duplicates) for h in r.hits),
                       req.max_results)
    if r.estimated:
        message = "about " + message
    if not index.searchable():
        message += " (index: rebuilding; searched the most recent units only)"
    if stale:  # complete as of the last change this machine applied
        return SearchResponse(total=r.total, shown=len(results), results=results,
                              message=message + "; " + cached_note(store.health.status()),
                              stale=True, store="unreachable")
    return SearchResponse(total=r.total, shown=len(results), message=message,
                          results=results)


async def _stale(store: Store, index: Index, req: SearchRequest) -> SearchResponse:
    total, hits = await asyncio.to_thread(
        offline_hits, index, index.recent, req.query, k=req.max_results, mode=req.mode,
        agent=req.agent, project=req.project, session_id=req.session_id)
    terms = plan_query(req.query, req.mode).terms
    return SearchResponse(total=total, shown=len(hits), results=_results(hits, terms),
                          message=stale_note(store.health.status(), total, len(hits)),
                          stale=True, store="unreachable")


def _results(hits: list[Hit], terms: list[str]) -> list[SearchResult]:
    # built from our own rows, already of the fields' types: not validated again
    # (validation was half the time of building them)
    return [
        _result({
            "unit_id": h.unit_id, "record_id": h.record_id, "agent": h.agent,
            "session_id": h.session_id, "project": h.project, "role": h.role,
            "kind": h.kind, "ts": h.ts, "turn": h.turn,
            "snippet": snippet(h.content, h.matched or terms), "one_liner": h.one_liner,
            "tool_name": h.tool_name, "score": round(h.score, 4), "path": h.path,
            "offset": h.offset, "why": h.why(), "archived": None})
        for h in hits
    ]


_RESULT_FIELDS = frozenset(SearchResult.model_fields)


def _result(values: dict[str, Any]) -> SearchResult:
    """`SearchResult.model_construct(**values)` given every field (the model has no
    aliases, defaults left to fill or post-init): the instance set up as it sets one up,
    without its walk over the fields and their aliases (7 of a search's ~1,000 µs per
    result; a test holds the two equal)."""
    m = SearchResult.__new__(SearchResult)
    object.__setattr__(m, "__dict__", values)
    object.__setattr__(m, "__pydantic_fields_set__", set(_RESULT_FIELDS))
    object.__setattr__(m, "__pydantic_extra__", None)
    object.__setattr__(m, "__pydantic_private__", None)
    return m


def _message(total: int, shown: int, folded: int, limit: int) -> str:
    """Say why fewer results are shown than matched: the -n limit, or near-duplicates
    folded into the ones shown (a bare "2 matches, showing 1" reads like a bug)."""
    why = []
    if folded and shown < total:
        why.append(f"{folded} near-duplicate{'s' if folded != 1 else ''} folded in")
    if shown < total and shown >= limit:
        why.append(f"-n {limit}")
    return f"{total} matches, showing {shown}" + (f" ({'; '.join(why)})" if why else "")
