"""The search index's read side: ranked candidates, asked of the committed index and the
live tail together (`memoryd.index.tail`), filters run inside the index; which query
terms the hits matched and their per-field scores are its base's
(`memoryd.index.matching`). `SearchIndex` (the package) owns the index's life cycle and
its writer; this is the part every search and context runs.
"""

from __future__ import annotations

import functools
import sqlite3
from dataclasses import replace
from typing import Any

import tantivy

from memoryd.index import fallback
from memoryd.index.bm25 import Freqs, MainStats, main_stats
from memoryd.index.helper import Helper
from memoryd.index.matching import TermMatches
from memoryd.index.query import (
    Filters,
    Occur,
    Q,
    either,
    estimate,
    filter_clauses,
    idf,
    ids_query,
    restricted,
    sessions_clause,
    term_tokens,
    text_parts,
    text_query,
)
from memoryd.index.tail import Combined, Tail
from memoryd.index.text import is_cjk

RANK_FIELDS = ("unit_id", "session_pk", "seq", "ts", "speaker", "dup", "chars")
"""The fast fields `ranked` reads for each candidate (`chars` last: `_chars`)."""
SESSION_CLAUSES = 64  # session-set filter clauses kept (`_sessions_clause`)


class IndexReader(TermMatches):
    """The searches of `SearchIndex` (its base): what they read of it (which terms the
    hits matched and their scores by field: `TermMatches`)."""

    schema: tantivy.Schema
    analyzer: Any
    state: str
    tail: Tail
    _index: tantivy.Index | None
    _stats: MainStats | None
    _session_clauses: dict[tuple[int, ...], tantivy.Query]
    _gen: int

    @functools.cached_property
    def helper(self) -> Helper:
        """The thread a search hands an independent part to (`memoryd.index.helper`)."""
        return Helper()

    def docs(self) -> int:
        """Units searchable: committed, plus the tail's new ones, less the committed ones
        the tail deleted."""
        idx = self._index
        if idx is None:
            return 0
        with self.tail.lock:
            s, t = idx.searcher(), self.tail
            gone = 0
            if t.replaced:  # those of them the index holds
                gone = s.search(ids_query(self.schema, sorted(t.replaced)), 1,
                                count=True).count or 0
            return s.num_docs - gone + len(t.docs)

    def _view(self, idx: tantivy.Index, terms: list[str]
              ) -> tuple[tantivy.Searcher, MainStats | None]:
        """The searcher, and the index's statistics when the tail has anything (call
        with `tail.lock` held: the searcher and the tail from the same side of a commit;
        `terms`: the query's, whose rarest token reads the statistics cheaply)."""
        s = idx.searcher()
        if not self.tail.docs:
            return s, None
        return s, self._main_stats(s, terms)

    def _main_stats(self, s: tantivy.Searcher, terms: list[str]) -> MainStats:
        """The committed index's BM25 statistics (call with `tail.lock` held: kept until
        the next commit or reset)."""
        if self._stats is None:
            probes = [x for t in terms if not is_cjk(t) or len(t) > 1
                      for x in term_tokens(self.analyzer, t)]
            self._stats = main_stats(s, self.schema, (*probes, *self.tail.last_tokens))
        return self._stats

    def searchable(self) -> bool:
        return self.state == "ready" and self._index is not None

    def candidates(self, conn: sqlite3.Connection, terms: list[str], f: Filters, *,
                   mode: str, limit: int, count: bool, w_body: float = 1.0,
                   w_one_liner: float = 3.0) -> tuple[int, list[tuple[int, float]]]:
        """(matches, [(unit id, score)] best first) for the terms under the filters."""
        got = self.ranked(conn, terms, f, mode=mode, limit=limit, count=count,
                          w_body=w_body, w_one_liner=w_one_liner)
        if got is None:
            return fallback.scan(conn, terms, f, mode=mode, limit=limit)
        return got[0], [(c["unit_id"], c["bm25"]) for c in got[1]]

    def ranked(self, conn: sqlite3.Connection, terms: list[str], f: Filters, *,
               mode: str, limit: int, count: bool, w_body: float = 1.0,
               w_one_liner: float = 3.0, speaker: bool = True
               ) -> tuple[int, list[dict[str, Any]], bool] | None:
        """(matches, candidates best first, whether matches is an estimate), each
        candidate what reranking needs, read from the index's fast fields (`RANK_FIELDS`)
        with its score as `bm25`: no SQLite row is read. A big unfiltered OR search's
        matches are estimated (`memoryd.index.query.estimate`). None while the index is
        not searchable (`candidates` falls back). Without `speaker` (a query whose
        wording asks about no one's messages: reranking does not look) the candidates'
        `speaker` is None: one fast-field read less, ~25-35 us at 1M units."""
        idx = self._index
        if not self.searchable() or idx is None:
            return None
        pks = None
        if f.by_session():
            pks = session_pks(conn, f)
            if not pks:
                return 0, [], False
        with self.tail.lock:
            s, stats = self._view(idx, terms)
            gen = self._gen
            replaced = set(self.tail.replaced)
            live: list[dict[str, Any]] = []
            freqs = Freqs(s)  # the index's own frequencies, read once each
            scoring: Any = freqs  # the frequencies text_query reads
            boost = None
            if stats is not None:
                plan = self.tail.plan(s, stats, terms, w_body=w_body,
                                      w_one_liner=w_one_liner)
                live = self.tail.search(plan, f, pks, mode)
                c = Combined(s, self.tail, stats)  # the index scored as after the commit
                scoring, boost = c, c.boost
            clauses = filter_clauses(self.schema, f, pks,
                                     self._sessions_clause(pks) if pks is not None else None)
            guess = estimate(freqs, self.analyzer, terms, mode) if count and not clauses else None
            exact = count and guess is None
            # an unfiltered OR query's one-liner clauses, searched apart (`_one_liner_hits`,
            # `_best`; under a filter the one query costs less: each search evaluates it)
            ones = None
            if mode == "or" and not exact and not clauses:
                ones = text_query(self.schema, self.analyzer, scoring, terms, mode,
                                  w_one_liner=w_one_liner, fields=("one_liner",))
                if ones is not None and not _no_negative_idf(scoring, self.analyzer, terms):
                    ones = None
            parts = text_parts(self.schema, self.analyzer, scoring, terms, mode,
                               w_body=w_body, w_one_liner=w_one_liner, boost=boost,
                               fields=("body",) if ones is not None else ("body", "one_liner"))
            if not parts:
                return 0, [], False
            q = either(parts)
        n = limit + len(replaced)
        # the one-liners' search on the helper thread while this one runs the body's
        both = None if ones is None else self.helper.start(
            lambda: _one_liner_hits(s, q, ones, clauses, n))
        if len(parts) > 1 and not clauses:
            hits, res_count = _side_by_side(self.helper, s, parts, n, exact)
        else:
            res = s.search(restricted(q, clauses), n, count=exact)
            hits, res_count = res.hits, res.count
        if both is not None:
            hits = _best(n, hits, both.result())
        addrs = [a for _, a in hits]
        cols = [s.fast_field_values(name, addrs) if speaker or name != "speaker"
                else [None] * len(addrs) for name in RANK_FIELDS[:-1]]
        cols.append(_chars(s, addrs, cols[RANK_FIELDS.index("dup")], every=bool(live)))
        found = [dict(zip(RANK_FIELDS, vals, strict=True), bm25=float(sc), at=(s, a, gen, freqs))
                 for (sc, a), *vals in zip(hits, *cols, strict=True)]
        if replaced or live:
            found, gone = merge(found, live, replaced, limit)
        else:
            gone = 0
        if guess is not None:
            return max(guess + len(live), len(found)), found, True
        total = res_count if exact and res_count is not None else len(found)
        return (max(total + len(live) - gone, len(found)) if exact else len(found)), found, False

    def _sessions_clause(self, pks: list[int]) -> tantivy.Query:
        """The filter clause of a set of sessions, built once: a context asks for its
        project's sessions on every request (a query object holds no documents: it stays
        right across commits and reloads)."""
        key = tuple(pks)
        q = self._session_clauses.get(key)
        if q is None:
            if len(self._session_clauses) >= SESSION_CLAUSES:
                self._session_clauses.clear()
            q = self._session_clauses[key] = sessions_clause(self.schema, pks)
        return q

def _one_liner_hits(s: tantivy.Searcher, body: tantivy.Query, ones: tantivy.Query,
                    clauses: list[tuple[tantivy.Occur, tantivy.Query]], n: int
                    ) -> list[tuple[float, tantivy.DocAddress]]:
    """The top `n` of the units some one-liner clause matches (few: they lead, the body
    clauses are seeked to them), scored by both fields: `_with_one_liners`' second
    search, independent of the first (`ranked` runs it on the helper thread)."""
    return s.search(restricted(Q.boolean_query([(Occur.Must, ones), (Occur.Should, body)]),
                               clauses), n, count=False).hits


def _best(n: int, *found: list[tuple[float, tantivy.DocAddress]]
          ) -> list[tuple[float, tantivy.DocAddress]]:
    """The top `n` of several searches' hits (a unit found twice: the later search's
    score), as tantivy orders one search's: by score, then address.

    `ranked` splits an OR query over body and one-liner in two: the top `n` of its body
    clauses alone, and `_one_liner_hits`. A unit of the true top `n` with a one-liner
    match is in the second search's top `n`; one without scores its body alone and is
    in the first's. The same units and scores (to f32 rounding) as the one query, while
    no one-liner clause scores below 0 (`_no_negative_idf`). tantivy scores that query's
    one union of term and one-liner clauses at about twice the cost of the term
    clauses' union alone (1M units, one-liners on 11%: 1.21 ms against 0.68 + 0.24 for
    the two searches, p50 CPU; bench/README, branch `reader2`)."""
    if len(found) > 1 and not found[-1]:
        return found[0]
    by = {(a.segment_ord, a.doc): (sc, a) for hits in found for sc, a in hits}
    return sorted(by.values(), key=lambda h: (-h[0], h[1].segment_ord, h[1].doc))[:n]


def _side_by_side(helper: Helper, s: tantivy.Searcher, parts: list[tantivy.Query], n: int,
                  count: bool) -> tuple[list[tuple[float, tantivy.DocAddress]], int | None]:
    """The top `n` of a query made of disjoint parts (`query.text_parts`: an AND query
    with one-liners), each part searched on its own, the first on the helper thread, the
    rest here, and the matches counted when `count` (their sum: no unit is in two)."""
    first = helper.start(lambda: s.search(parts[0], n, count=count))
    rest = [s.search(p, n, count=count) for p in parts[1:]]
    res = [first.result(), *rest]
    total = sum(r.count or 0 for r in res) if count else None
    return _best(n, *(r.hits for r in res)), total


def _no_negative_idf(scoring: Any, analyzer: tantivy.TextAnalyzer, terms: list[str]) -> bool:
    """Whether no term's one-liner clause scores below 0, as `_with_one_liners` needs: a
    term's IDF (`query.idf`) is negative where its frequency, which counts deleted
    documents until a merge drops them, exceeds the live documents."""
    return all(idf(scoring, tokens) >= 0 for t in terms if (tokens := term_tokens(analyzer, t)))


def _chars(s: tantivy.Searcher, addrs: list[Any], dups: list[int], *, every: bool
           ) -> list[int]:
    """The `chars` of the candidates: read only for those another candidate shares a
    near-duplicate key with (the only ones `retrieval._dedupe` compares lengths of; the
    others 0), or for all (`every`: the tail's candidates join them). Most searches then
    read one fast field less."""
    if every:
        return s.fast_field_values("chars", addrs)
    seen: set[int] = set()
    twins = {d for d in dups if d and (d in seen or seen.add(d))}
    if not twins:
        return [0] * len(addrs)
    at = [i for i, d in enumerate(dups) if d in twins]
    out = [0] * len(addrs)
    for i, n in zip(at, s.fast_field_values("chars", [addrs[i] for i in at]), strict=True):
        out[i] = n
    return out


def merge(found: list[dict[str, Any]], live: list[dict[str, Any]], replaced: set[int],
          limit: int) -> tuple[list[dict[str, Any]], int]:
    """The index's candidates without the units the tail replaced, and the tail's, best
    first (an equal score: the index's first, as a later segment's documents come after
    it), at most `limit`; and how many of the index's were left out."""
    kept = [c for c in found if c["unit_id"] not in replaced]
    both = sorted(kept + live, key=lambda c: -c["bm25"])
    return both[:limit], len(found) - len(kept)


def session_pks(conn: sqlite3.Connection, f: Filters) -> list[int]:
    """The sessions the filters allow. A project and what lies below it is a range of
    the `sessions_project` index in SQLite: `LIKE 'root/%'` scanned the whole index (1.1
    ms per context for 2,000 sessions), the range reads the project's rows (0.1 ms). It
    matches case-sensitively, as `retrieval._within` and PostgreSQL's LIKE (which keeps
    it: a collation may not order '/' next to '0')."""
    within = f.project_within
    if within is None or not isinstance(conn, sqlite3.Connection):
        clauses, args = fallback.session_where(f)
    else:
        clauses, args = fallback.session_where(replace(f, project_within=None))
        root = within.rstrip("/")
        clauses.append("(s.project = ? OR (s.project >= ? AND s.project < ?))")
        args += [root, root + "/", root + "0"]  # "0" follows "/"
    return [r[0] for r in conn.execute(
        "SELECT s.id FROM sessions s WHERE " + " AND ".join(clauses), args)]
