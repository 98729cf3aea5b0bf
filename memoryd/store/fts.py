"""Full-text indexing of mixed-script text with FTS5.

FTS5's unicode61 tokenizer treats a run of Chinese/Japanese characters as one token,
and the trigram tokenizer needs three characters, so a two-character Chinese word
would never match. We index CJK runs as overlapping bigrams (plus the run's last
character alone, so a one-character query can match as a prefix) and leave other
scripts to unicode61 with the Porter stemmer. Queries get the same treatment: a CJK
word becomes a phrase of its bigrams.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Han (incl. extension A and compatibility), kana, CJK punctuation excluded.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TERM = re.compile(f"[{_CJK}]+|[^\\W_]+(?:['’][^\\W_]+)*", re.UNICODE)
_HAS_CJK = re.compile(f"[{_CJK}]")

TOKENIZER = "porter unicode61 remove_diacritics 2"


def bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def index_text(text: str) -> str:
    """Text as FTS5 should see it: CJK runs replaced by their bigrams."""
    if not _HAS_CJK.search(text):
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(bigrams(m.group())) + " ", text)


def query_terms(query: str) -> list[str]:
    """The searchable terms of a free-text query, in order, de-duplicated."""
    seen: dict[str, None] = {}
    for m in _TERM.finditer(query):
        t = m.group().lower()
        if t not in seen:
            seen[t] = None
    return list(seen)


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def term_expr(term: str) -> str:
    """One term as an FTS5 expression."""
    if _HAS_CJK.match(term):
        if len(term) == 1:
            return _quote(term) + "*"
        grams = [term[i : i + 2] for i in range(len(term) - 1)]
        return _quote(" ".join(grams)) if len(grams) > 1 else _quote(grams[0])
    return _quote(term)


def match_expression(terms: Iterable[str], mode: str = "or") -> str | None:
    exprs = [term_expr(t) for t in terms]
    if not exprs:
        return None
    joiner = " AND " if mode == "and" else " OR "
    return joiner.join(exprs)


def snippet(text: str, terms: list[str], width: int = 240) -> str:
    """A window of `text` around the first matched term (case-insensitive, stem-blind:
    a term matches as a prefix of a word), on one line."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    low = flat.lower()
    pos = -1
    for t in terms:
        probe = t if _HAS_CJK.match(t) else t[: max(3, len(t) - 2)]
        p = low.find(probe)
        if p != -1 and (pos == -1 or p < pos):
            pos = p
    if pos == -1:
        return flat[: width - 1] + "…"
    start = max(0, pos - width // 3)
    end = min(len(flat), start + width)
    out = flat[start:end]
    return ("…" if start else "") + out + ("…" if end < len(flat) else "")
