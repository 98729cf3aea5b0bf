"""The top k of an OR search without scoring every match: MaxScore (Turtle and Flood,
1995) in the query's shape.

tantivy-py's `Searcher.search` collects through a `MultiCollector`, and so scores every
document the query matches whatever the limit: tantivy's block-max WAND never runs (a
one-term query over 400k postings whose top 15 are its first 15 documents takes as long
as counting them: bench/query_shapes.py). What it does do is leapfrog: a boolean query
with a required clause walks that clause's postings only, and seeks the optional
clauses' postings to each of its documents.

So: each term's body clause can add at most `bound` to a score (BM25 of a token is below
`idf * (1 + K1)` whatever its frequency and the field's length). Once k documents scoring
at least `theta` are known, a document that matches only terms whose bounds add up to
less than `theta` cannot reach the top k. Those terms are "non-essential": the search
requires one of the others (or a one-liner match, few documents) and only seeks into
them. The top k and their scores are those of the plain query (`text_query`), to f32
rounding.

`theta` comes from a first search that requires the term of the highest bound (the
rarest); when the other terms' bounds add up to less than its k-th score, that search
was already the answer. Otherwise a second one requires the essential terms that
`theta` leaves. With one searchable body term, an exact count asked, few postings or a
CJK prefix term, there is nothing to gain: `top` returns None and the caller runs the
plain query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tantivy

from memoryd.index.bm25 import K1
from memoryd.index.bm25 import idf as bm25_idf
from memoryd.index.query import (
    WEAK,
    _may_match,
    idf,
    restricted,
    term_clause,
    term_tokens,
)
from memoryd.index.text import is_cjk, weak_term

Q, Occur = tantivy.Query, tantivy.Occur

FEW_POSTINGS = 10_000
"""Below this many body postings in all, the plain query is as cheap as a first pass."""
SLACK = 1.001
"""Bounds are raised by this factor: tantivy scores in f32."""


@dataclass(slots=True)
class Part:
    query: tantivy.Query
    bound: float     # the most it adds to a score (inf: always required)
    postings: int = 0


def parts(schema: tantivy.Schema, analyzer: tantivy.TextAnalyzer, stats: object,
          raw: tantivy.Searcher, terms: list[str], *, n_docs: int, w_body: float,
          w_one_liner: float, boost: Callable[[str], float] | None, one_liners: bool = True
          ) -> tuple[list[Part], list[Part]]:
    """(body parts with their bounds, parts always required) of an OR query over body and
    one-liner (without `one_liners`: the body alone), scoring as `text_query` does.
    `stats`: the searcher `text_query` reads frequencies from (the index's, or `Combined`
    with the tail); `raw`: the index's own searcher, whose BM25 counts `n_docs`
    documents (deleted ones too)."""
    body: list[Part] = []
    always: list[Part] = []
    for t in terms:
        tokens = term_tokens(analyzer, t)
        if not tokens:
            continue
        w = WEAK if weak_term(t) else 1.0
        prefix = is_cjk(t) and len(t) == 1
        b = term_clause(schema, "body", t, tokens, None if prefix else boost)
        assert b is not None
        if w * w_body != 1.0:
            b = Q.boost_query(b, w * w_body)
        if prefix:  # a regex: its terms (and so its bound) are not known here
            always.append(Part(b, float("inf")))
        else:
            bound, post = 0.0, []
            for x in dict.fromkeys(tokens):
                df = raw.doc_freq("body", x)
                post.append(df)
                if df:
                    f = boost(x) if boost is not None else 1.0
                    bound += (1.0 + K1) * bm25_idf(df, n_docs) * f
            body.append(Part(b, w * w_body * bound * SLACK, min(post)))
        if one_liners and _may_match(stats, "one_liner", t, tokens):  # type: ignore[arg-type]
            o = term_clause(schema, "one_liner", t, tokens)
            assert o is not None
            always.append(Part(Q.const_score_query(
                o, w * w_one_liner * idf(stats, tokens)), float("inf")))  # type: ignore[arg-type]
    return body, always


def top(searcher: tantivy.Searcher, body: list[Part], always: list[Part],
        filters: list[tuple[tantivy.Occur, tantivy.Query]], limit: int, *,
        force: bool = False) -> list[tuple[float, tantivy.DocAddress]] | None:
    """The `limit` best (score, address) of the OR of all parts under the filters, or
    None when pruning cannot pay (the caller runs the plain query). `force`: prune
    whenever it is possible, cost aside (tests)."""
    if len(body) < 2 or limit <= 0:
        return None
    if not force and sum(p.postings for p in body) <= FEW_POSTINGS:
        return None
    ranked = sorted(body, key=lambda p: -p.bound)
    rest = sum(p.bound for p in ranked[1:])
    if not force and (rest >= LIKELY_THETA * ranked[0].bound
                      or not pays(ranked[:1], ranked[1:])):
        return None

    def run(required: list[Part], optional: list[Part]) -> list[tuple[float, object]]:
        req = [p.query for p in always + required]
        must = req[0] if len(req) == 1 else Q.boolean_query([(Occur.Should, q) for q in req])
        for p in optional:  # one at a time: tantivy seeks a union by scoring its windows
            must = Q.boolean_query([(Occur.Must, must), (Occur.Should, p.query)])
        return searcher.search(restricted(must, filters), limit, count=False).hits

    hits = run(ranked[:1], ranked[1:])
    theta = hits[-1][0] if len(hits) >= limit else 0.0
    if rest < theta:
        return hits  # the rest cannot reach the top k alone
    optional, acc = [], 0.0
    for p in reversed(ranked):  # the smallest bounds first
        if acc + p.bound >= theta:
            break
        optional.append(p)
        acc += p.bound
    if not optional:
        return None
    required = [p for p in ranked if all(p is not o for o in optional)]
    if not force and not pays(required, optional):
        return None
    return run(required, optional)


LIKELY_THETA = 0.6
"""A first pass is tried only when the other terms' bounds add up to less than this share
of the top term's bound: the k-th score it finds is 0.5-0.67 of that bound (1M units,
top 30), and a first pass that cannot end the search costs more than it saves (a second
pass seeks the other terms' postings: bench/query_shapes.py)."""
SEEK_COST = 4.0
"""What seeking one optional term's postings to a required document costs, in postings
walked (bench/query_shapes.py at 1M units: a seek costs several times a step)."""


def pays(required: list[Part], optional: list[Part]) -> bool:
    """Whether walking the required parts' postings and seeking the optional ones to each
    is clearly cheaper than walking all postings (the plain query)."""
    walk = sum(p.postings for p in required)
    return walk * (1.0 + SEEK_COST * len(optional)) \
        < 0.5 * (walk + sum(p.postings for p in optional))
