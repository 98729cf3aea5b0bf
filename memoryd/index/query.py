"""Query terms and filters as tantivy queries.

A term is analyzed like the text it is matched against: an English word is stemmed (one
token: a term query; several, as "don't": all of them), a CJK word becomes all of its
bigrams, a single CJK character matches as a prefix. (The index keeps no positions, so
no phrase queries: the bigrams of a CJK word are nearly always adjacent where all of
them occur.) Each term looks in the body and in
the one-liner (weighted up); OR mode adds up what matches, AND mode needs every term.
A lone digit or one-letter word weighs `WEAK` of a term. Filters are exact and do not
score: a set of sessions, a time range, and the asking session's recent tail left out.

A one-liner match scores its weight times the term's IDF, flat. BM25 in the one-liner
field would judge a one-liner's length against the average over *all* units, most of
which have none yet, and so crush every one-liner match to almost nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import tantivy

from memoryd.index import bm25
from memoryd.index.text import cjk_grams, is_cjk, weak_term

WEAK = 0.15

Occur = tantivy.Occur
Q = tantivy.Query

Exclusion = tuple[int, int]
"""(session_pk, from_seq): leave out that session's units with seq >= from_seq."""


@dataclass(frozen=True, slots=True)
class Filters:
    """Exact filters of a search. Session attributes are matched in SQLite (sessions is
    small) and reach the index as a set of session pks."""

    agent: str | None = None
    project: str | None = None
    session_id: str | None = None
    project_within: str | None = None  # the project is this directory or below it
    since: float | None = None
    until: float | None = None
    exclude: list[Exclusion] = field(default_factory=list)

    def by_session(self) -> bool:
        return any(v is not None for v in (self.agent, self.project, self.session_id,
                                            self.project_within))

    def narrows(self) -> bool:
        """Any filter at all: some units are left out."""
        return self.by_session() or self.since is not None or self.until is not None \
            or bool(self.exclude)


def term_tokens(analyzer: tantivy.TextAnalyzer, term: str) -> list[str]:
    """The indexed tokens a query term stands for (a lone CJK character: itself)."""
    return list(_term_tokens(analyzer, term))


@functools.lru_cache(maxsize=1024)
def _term_tokens(analyzer: tantivy.TextAnalyzer, term: str) -> tuple[str, ...]:
    """`term_tokens`, kept: a search asks for each term's tokens 6-10 times (its body and
    one-liner clauses, the estimate, the pruning's bounds, which terms each hit matched)
    and the analyzer's call costs ~7 us (1M units: ~24 calls, 0.17 ms of a search)."""
    if is_cjk(term):
        return tuple(cjk_grams(term))
    return tuple(analyzer.analyze(term))


def term_clause(schema: tantivy.Schema, fname: str, term: str, tokens: list[str],
                boost: Callable[[str], float] | None = None) -> tantivy.Query | None:
    """One query term in one field, or None when nothing of it is searchable (`boost`:
    a factor per token, `memoryd.index.tail.Combined.boost`)."""
    if not tokens:
        return None
    if is_cjk(term) and len(term) == 1:
        return Q.regex_query(schema, fname, re.escape(term) + ".*")

    def one(t: str) -> tantivy.Query:
        q = Q.term_query(schema, fname, t)
        b = boost(t) if boost is not None else 1.0
        return q if b == 1.0 else Q.boost_query(q, b)

    if len(tokens) == 1:
        return one(tokens[0])
    return Q.boolean_query([(Occur.Must, one(t)) for t in dict.fromkeys(tokens)])


def idf(searcher: tantivy.Searcher, tokens: list[str]) -> float:
    """BM25's IDF of a term in the body field (of its rarest token, for a phrase)."""
    df = min((searcher.doc_freq("body", t) for t in tokens), default=0)
    return bm25.idf(df, searcher.num_docs)


EXACT_COUNT_UPTO = 20_000
"""Matches counted exactly while the terms' postings hold at most this many documents
together; beyond, `estimate` (counting disables tantivy's top-k pruning: every match is
scored, ~35% of an unfiltered search's time on a 200k-unit store)."""


def estimate(searcher: tantivy.Searcher, analyzer: tantivy.TextAnalyzer, terms: list[str],
             mode: str, upto: int = EXACT_COUNT_UPTO) -> int | None:
    """How many units an unfiltered OR search of `terms` matches, estimated from the
    terms' document frequencies (as if independent), or None when an exact count is
    cheap (few postings), the mode is AND (its matches are few) or a term is a prefix."""
    if mode == "and":
        return None
    dfs = []
    for t in terms:
        if is_cjk(t) and len(t) == 1:
            return None
        tokens = term_tokens(analyzer, t)
        if tokens:
            dfs.append(min(searcher.doc_freq("body", x) for x in tokens))
    if sum(dfs) <= upto:
        return None
    n = searcher.num_docs
    miss = 1.0
    for df in dfs:
        miss *= 1.0 - min(df, n) / n
    return round(n * (1.0 - miss))


def text_query(schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer,
               searcher: tantivy.Searcher, terms: list[str], mode: str = "or", *,
               w_body: float = 1.0, w_one_liner: float = 3.0,
               fields: tuple[str, ...] = ("body", "one_liner"),
               boost: Callable[[str], float] | None = None) -> tantivy.Query | None:
    """The terms over the given fields, weighted; None when no term is searchable.
    (`boost`: a factor per body token; the live tail's IDF correction.)"""
    parts = text_parts(schema, analyzer, searcher, terms, mode, w_body=w_body,
                       w_one_liner=w_one_liner, fields=fields, boost=boost)
    return either(parts) if parts else None


def either(parts: list[tantivy.Query]) -> tantivy.Query:
    """The union of a query's disjoint parts (`text_parts`): the query itself."""
    return parts[0] if len(parts) == 1 else Q.boolean_query(
        [(Occur.Should, p) for p in parts])


def text_parts(schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer,
               searcher: tantivy.Searcher, terms: list[str], mode: str = "or", *,
               w_body: float = 1.0, w_one_liner: float = 3.0,
               fields: tuple[str, ...] = ("body", "one_liner"),
               boost: Callable[[str], float] | None = None) -> list[tantivy.Query]:
    """`text_query` as the disjoint parts it is the union of (none: no term is
    searchable): two for an AND query whose terms may match in a one-liner
    (`_and_split`), else the one query. Searched side by side, each part's hits keep
    the scores the union gives them (a unit matches one part only)."""
    occur = Occur.Must if mode == "and" else Occur.Should
    clauses = []
    bodies: list[tantivy.Query | None] = []  # AND: each term's body clause (weighted) ...
    ones: list[tantivy.Query] = []  # ... and the one-liner clauses there are
    for t in terms:
        tokens = term_tokens(analyzer, t)
        per_field = []
        named: dict[str, tantivy.Query] = {}
        for f in fields:
            if f == "one_liner" and not _may_match(searcher, f, t, tokens):
                continue
            q = term_clause(schema, f, t, tokens, boost if f == "body" else None)
            if q is None:
                continue
            if f == "one_liner":
                q = Q.const_score_query(q, w_one_liner * idf(searcher, tokens))
            elif w_body != 1.0:
                q = Q.boost_query(q, w_body)
            per_field.append((Occur.Should, q))
            named[f] = q
        if not per_field:
            continue
        if mode != "and":  # a flat OR of every field's clause: what a term adds is its
            # fields' sum either way; one union instead of one per term (with one-liners
            # in 5% of 1M units: 1.98 -> 1.38 ms mean per search)
            clauses += [(occur, Q.boost_query(q, WEAK) if weak_term(t) else q)
                        for _, q in per_field]
            continue
        q = per_field[0][1] if len(per_field) == 1 else Q.boolean_query(per_field)
        if weak_term(t):
            q = Q.boost_query(q, WEAK)
        clauses.append((occur, q))
        body = named.get("body")
        bodies.append(body if body is None or not weak_term(t) else Q.boost_query(body, WEAK))
        if "one_liner" in named:
            ones.append(named["one_liner"])
    if not clauses:
        return []
    if ones and all(b is not None for b in bodies):
        return _and_split(clauses, bodies, ones)  # type: ignore[arg-type]
    return [Q.boolean_query(clauses)]


def _and_split(terms: list[tuple[tantivy.Occur, tantivy.Query]], bodies: list[tantivy.Query],
               ones: list[tantivy.Query]) -> list[tantivy.Query]:
    """An AND query whose terms may match in a one-liner, as two disjoint parts: the
    units with every term in the body and none in a one-liner (an intersection of term
    postings), and the units with a one-liner match of some term that match every term
    in the body or the one-liner (`terms`: each term's union of the two). The same units
    and scores (to f32 rounding) as `terms` alone, whose intersection of unions is
    seeked by scoring windows of each union: with one-liners in 5% of 1M units, 2.2 ->
    0.96 ms per AND search."""
    in_body = Q.boolean_query([(Occur.Must, b) for b in bodies]
                              + [(Occur.MustNot, o) for o in ones])
    any_one = Q.const_score_query(Q.boolean_query([(Occur.Should, o) for o in ones]), 0.0)
    via_one = Q.boolean_query([*terms, (Occur.Must, any_one)])
    return [in_body, via_one]


def match_query(schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer,
                searcher: tantivy.Searcher, term: str) -> tantivy.Query | None:
    """The units one term matches in the body or the one-liner, as `text_query` matches
    it, without its scoring (`matched_ids` scores each term a constant): no IDF, no
    weights, so no document frequencies read but `_may_match`'s. None when nothing of
    it is searchable."""
    clauses = [(Occur.Should, q) for q in field_match_queries(schema, analyzer, searcher, term)
               if q is not None]
    if not clauses:
        return None
    return clauses[0][1] if len(clauses) == 1 else Q.boolean_query(clauses)


def field_match_queries(schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer,
                        searcher: tantivy.Searcher, term: str
                        ) -> tuple[tantivy.Query | None, tantivy.Query | None]:
    """`match_query`'s clauses: the units one term matches in the body, and in the
    one-liner (None: nothing of it searchable there)."""
    tokens = term_tokens(analyzer, term)
    body = term_clause(schema, "body", term, tokens)
    if not _may_match(searcher, "one_liner", term, tokens):
        return body, None
    return body, term_clause(schema, "one_liner", term, tokens)


def _may_match(searcher: tantivy.Searcher, fname: str, term: str, tokens: list[str]
               ) -> bool:
    """Whether a term can match in a field: False when one of its tokens is in no
    document's field (most units have no one-liner). Leaving out a clause that can match
    nothing changes no score, and the search got faster without it: 5.6 ms -> 1.5 ms
    per search on a 200k-unit store (measured then). Not by block skipping, as was
    thought: tantivy-py's search scores every match whatever the query's shape (its
    `MultiCollector`); why is not measured again."""
    if not tokens or (is_cjk(term) and len(term) == 1):
        return True  # a prefix: its terms are not known here
    return all(searcher.doc_freq(fname, t) > 0 for t in dict.fromkeys(tokens))


def filter_clauses(schema: tantivy.Schema, f: Filters, session_pks: list[int] | None,
                   sessions: tantivy.Query | None = None
                   ) -> list[tuple[tantivy.Occur, tantivy.Query]]:
    """Non-scoring clauses for the filters (`session_pks`: the sessions allowed, or None
    for any; `sessions`: their clause already built, `sessions_clause`)."""
    out = []
    if session_pks is not None:
        out.append((Occur.Must, sessions or sessions_clause(schema, session_pks)))
    if f.since is not None or f.until is not None:
        out.append((Occur.Must, Q.const_score_query(Q.range_query(
            schema, "ts", tantivy.FieldType.Float, f.since, f.until), 0.0)))
    for pk, from_seq in f.exclude:
        out.append((Occur.MustNot, Q.boolean_query([
            (Occur.Must, Q.term_query(schema, "session_pk", pk)),
            (Occur.Must, Q.range_query(schema, "seq", tantivy.FieldType.Unsigned,
                                       max(0, from_seq), None))])))
    return out


def sessions_clause(schema: tantivy.Schema, session_pks: list[int]) -> tantivy.Query:
    """The non-scoring clause "one of these sessions" (a project's: ~54 term queries at
    1M units, 0.6 ms to build; `SearchIndex` keeps the last ones built)."""
    return Q.const_score_query(any_of(schema, "session_pk", session_pks), 0.0)


def any_of(schema: tantivy.Schema, fname: str, values: list[int]) -> tantivy.Query:
    """Documents whose `fname` is one of `values`: a union of term queries. (tantivy's
    term_set_query reads the whole field per search: 5 ms for 15 ids in 30k units, the
    union of their postings 0.1 ms.)"""
    if len(values) == 1:
        return Q.term_query(schema, fname, values[0])
    return Q.boolean_query([(Occur.Should, Q.term_query(schema, fname, v)) for v in values])


def ids_query(schema: tantivy.Schema, ids: list[int]) -> tantivy.Query:
    return Q.const_score_query(any_of(schema, "unit_id", ids), 0.0)


def restricted(q: tantivy.Query, clauses: list[tuple[tantivy.Occur, tantivy.Query]]
               ) -> tantivy.Query:
    return Q.boolean_query([(Occur.Must, q), *clauses]) if clauses else q
