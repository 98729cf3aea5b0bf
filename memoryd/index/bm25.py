"""tantivy's BM25, as the live tail (`memoryd.index.tail`) needs it to score like the
index: its constants and field-length table, the committed index's statistics (read
from tantivy's own explanation of a hit: the bindings give no other way to the document
count with deleted ones, or the average field length), and `Freqs`, a searcher's
document frequencies read once (`Combined`, with the tail counted in, is the tail's)."""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass
from typing import Any

import tantivy

K1, B = 1.2, 0.75  # tantivy's BM25 (src/query/bm25.rs)


def _field_norms() -> list[int]:
    """tantivy's `FIELD_NORMS_TABLE` (src/fieldnorm/code.rs): a field's length is kept as
    one byte; lengths 0-40 exactly, then buckets whose width doubles every 8 steps."""
    out = list(range(41))
    step, v = 2, 40
    while len(out) < 256:
        for _ in range(8):
            v += step
            out.append(v)
            if len(out) == 256:
                break
        step *= 2
    return out


FIELD_NORMS = _field_norms()


def fieldnorm(n: int) -> int:
    """The length tantivy's BM25 sees for a field of `n` tokens."""
    return FIELD_NORMS[bisect.bisect_right(FIELD_NORMS, n) - 1]


@dataclass(frozen=True, slots=True)
class MainStats:
    """The committed index's BM25 statistics for the body field: documents (tantivy's
    `max_doc`, deleted ones included, as its BM25 counts them), live documents (what
    `memoryd.index.query.idf` counts) and body tokens."""

    docs: int = 0
    live: int = 0
    tokens: float = 0.0


PROBES = ("the", "to", "a", "i", "is", "and", "it", "you", "of", "in")


def main_stats(searcher: tantivy.Searcher, schema: tantivy.Schema,
               probes: tuple[str, ...] = ()) -> MainStats:
    """Read the index's statistics from tantivy's own explanation of one BM25 hit (the
    bindings do not give them out otherwise): of `probes` (a query's tokens, the last
    commit's) and common words, the one the fewest committed bodies hold, else the term
    dictionary's first. The rarest: the search for that one hit walks all of the term's
    postings (31 ms for "the" at 1M units, under 1 ms for a rare word)."""
    live = searcher.num_docs
    if not live:
        return MainStats()
    held = sorted((df, t) for t in dict.fromkeys((*probes, *PROBES))
                  if (df := searcher.doc_freq("body", t)))
    def tokens() -> Any:
        yield from (t for _, t in held)
        # the dictionary's first term: its walk is slow (2 s at 1M units), seldom needed
        yield from (t for t, _ in searcher.terms_with_prefix("body", "", limit=1))

    for tok in tokens():  # a term held only by deleted documents finds no hit
        q = tantivy.Query.term_query(schema, "body", tok)
        hits = searcher.search(q, 1, count=False).hits
        if hits:
            break
    else:
        return MainStats(live, live, 0.0)
    got: dict[str, float] = {}

    def walk(node: dict[str, Any]) -> None:
        d = node.get("description", "")
        if d.startswith(("N,", "avgdl")):
            got[d.split(",")[0]] = float(node["value"])
        for child in node.get("details", ()):
            walk(child)

    walk(json.loads(q.explain(searcher, hits[0][1]).to_json()))
    n = int(got.get("N", live))
    return MainStats(n, live, got.get("avgdl", 0.0) * n)


class Freqs:
    """A searcher's document frequencies, each read once: planning one search asks for a
    token's frequency in a field up to four times (its clauses, the estimate, the
    pruning's bounds, the one-liners' IDF), ~7 us each at 1M units in 9 segments. Made
    per search: a searcher's frequencies do not change, a new one's may."""

    __slots__ = ("_seen", "num_docs", "searcher")

    def __init__(self, searcher: tantivy.Searcher) -> None:
        self.searcher, self.num_docs = searcher, searcher.num_docs
        self._seen: dict[tuple[str, str], int] = {}

    def doc_freq(self, fname: str, token: str) -> int:
        df = self._seen.get((fname, token))
        if df is None:
            df = self._seen[fname, token] = self.searcher.doc_freq(fname, token)
        return df


def idf(df: int, n: int) -> float:
    """BM25's IDF of a token held by `df` of `n` documents (tantivy's formula)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))
