"""The long-term section's order: MEMORY.md's entries that match a context's query, then
the newest.

An entry matches by its words (`memoryd.memory.search`: most of the query's words, then
the newest) and, with embeddings (`memoryd.embed.entries`), by meaning: the `DEPTH`
entries nearest the query join the word matches by reciprocal-rank fusion, as units do
(`memoryd.recall.union`: k 60, the vectors' weight 1). An entry asked in other words
(a rule restated in a later session, the other language) is then in the section where
its words alone left it out. Measured held out by set on the admission sets' memory
labels as entries and their paraphrases, original and restated messages as queries
(bench/eval_embed_entries.py).
"""

from __future__ import annotations

from memoryd.memory import Document, Entry, newest_first
from memoryd.memory import search as search_entries
from memoryd.recall.retrieval import plan_query

DEPTH = 10  # the entries nearest the query that count as matching it
RRF_K = 60.0
W_VECTOR = 1.0
LISTED = 50  # of each kind: matching, recent
WORDS = "matches the query"


def text_of(e: Entry) -> str:
    """What is embedded of an entry (`memoryd.embed.entries`): its items, not its date or
    source."""
    return "; ".join(e.items)


def texts(doc: Document) -> list[str]:
    """The entries' texts to embed, newest first (the worker embeds in this order)."""
    return [text_of(e) for e in newest_first(doc.entries)]


def ranked(doc: Document, query: str, near: dict[int, float] | None = None, *,
           depth: int = DEPTH, w: float = W_VECTOR) -> list[tuple[Entry, str]]:
    """The entries to offer, each with why: those matching the query first, best first,
    then the newest of the rest. `near`: each entry's cosine with the query, by line
    (those with a vector); None or empty ranks by words alone."""
    terms = plan_query(query).terms if query else []
    words = list(search_entries(doc, terms, "or", LISTED).results) if terms else []
    relevant = fuse(doc, words, near, depth, w) if near else [(e, WORDS) for e in words]
    seen = {e.line for e, _ in relevant}
    recent = [e for e in newest_first(doc.entries)[:LISTED] if e.line not in seen]
    return [*relevant, *((e, "recent") for e in recent)]


def fuse(doc: Document, words: list[Entry], near: dict[int, float], depth: int = DEPTH,
         w: float = W_VECTOR) -> list[tuple[Entry, str]]:
    """The word matches and the `depth` nearest of `doc`'s entries (`near` may hold
    others: those the context left out) as one list: 1/(k + rank by words) + w/(k + rank
    by meaning), of the lists an entry is in; ties keep the words' order."""
    by_line = {e.line: e for e in doc.entries}
    score = {e.line: 1.0 / (RRF_K + rank) for rank, e in enumerate(words, 1)}
    nearest = sorted((line for line in near if line in by_line),
                     key=lambda line: -near[line])[:depth]
    for rank, line in enumerate(nearest, 1):
        score[line] = score.get(line, 0.0) + w / (RRF_K + rank)
    matched, close = {e.line for e in words}, set(nearest)
    out = []
    for line in sorted(score, key=lambda line: -score[line]):
        why = WORDS
        if line in close:
            cosine = f"(cosine {near[line]:.2f})"
            why = (f"{WORDS}; close in meaning {cosine}" if line in matched
                   else f"close in meaning to the query {cosine}")
        out.append((by_line[line], why))
    return out
