"""Text as the search index sees it: mixed scripts, camelCase, stop words.

A word tokenizer treats a run of Chinese/Japanese characters as one token, so a
two-character Chinese word inside a sentence would never match. We index CJK runs as
overlapping bigrams (plus the run's last character alone, so a one-character query can
match as a prefix) and leave other scripts to the index's analyzer (simple tokenizer,
lowercase, ASCII folding, English stemmer: `memoryd.index.schema`). Queries get the same
treatment: a CJK word becomes a phrase of its bigrams.

The stock tokenizer also keeps a camelCase word ("iPhone", "getUserName",
"#PlankChallenge") whole; we index it whole *and*, at the end of the text, as its parts,
so "phone" or "user name" finds it. Stop words are dropped from a query unless it has
nothing else (`content_terms`).
"""

from __future__ import annotations

import hashlib
import re

from memoryd.stopwords import STOP_WORDS

# Han (incl. extension A and compatibility), kana, CJK punctuation excluded.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TERM = re.compile(f"[{_CJK}]+|[^\\W_]+(?:['’][^\\W_]+)*", re.UNICODE)
_HAS_CJK = re.compile(f"[{_CJK}]")
# a word with a lower-to-upper case change inside it, and the parts it splits into
_CAMEL_WORD = re.compile(r"\b[A-Za-z]*[a-z][A-Z][A-Za-z]*\b")
_CAMEL_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_LOWER_UPPER = re.compile(r"[a-z][A-Z]")  # cheap pre-check: most prose has no camelCase

def bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def camel_parts(text: str) -> list[str]:
    """The parts of the camelCase words in `text`, in order ("iPhone" -> "i", "Phone")."""
    parts: list[str] = []
    if not _LOWER_UPPER.search(text):
        return parts
    for m in _CAMEL_WORD.finditer(text):
        parts += _CAMEL_PART.findall(m.group())
    return parts


def index_text(text: str) -> str:
    """Text as the index should see it: CJK runs replaced by their bigrams, and the parts of
    camelCase words appended (after the text, so phrases in it stay contiguous)."""
    if _HAS_CJK.search(text):
        text = _CJK_RUN.sub(lambda m: " " + " ".join(bigrams(m.group())) + " ", text)
    parts = camel_parts(text)
    if parts:
        text = text + "\n" + " ".join(parts)
    return text


def query_terms(query: str) -> list[str]:
    """The searchable terms of a free-text query, in order, de-duplicated."""
    seen: dict[str, None] = {}
    for m in _TERM.finditer(query):
        t = m.group().lower()
        if t not in seen:
            seen[t] = None
    return list(seen)


def content_terms(terms: list[str]) -> list[str]:
    """`terms` without stop words, or all of them when nothing else is left."""
    kept = [t for t in terms if t not in STOP_WORDS]
    return kept or list(terms)


def split_cjk(terms: list[str]) -> list[str]:
    """CJK terms longer than two characters as their bigrams (de-duplicated, in order).
    Chinese and Japanese are written without spaces, so a question is one long run; as a
    single phrase it would only match itself. Its bigrams, OR-ed, let BM25 rank the units
    that share the most of them (as CJK bigram analyzers do)."""
    out: dict[str, None] = {}
    for t in terms:
        if _HAS_CJK.match(t) and len(t) > 2:
            for i in range(len(t) - 1):
                out.setdefault(t[i : i + 2], None)
        else:
            out.setdefault(t, None)
    return list(out)


def is_cjk(term: str) -> bool:
    return bool(_HAS_CJK.match(term))


def cjk_grams(term: str) -> list[str]:
    """A CJK query word as the index holds it: its bigrams in order (one character:
    itself, matched as a prefix by the caller)."""
    if len(term) <= 2:
        return [term]
    return [term[i : i + 2] for i in range(len(term) - 1)]


def weak_term(term: str) -> bool:
    """A lone digit or a one-letter word: it matches almost everything ("4" in "note
    14" once stemmed and split), so it should weigh little."""
    return len(term) == 1 and not _HAS_CJK.match(term)


def _first(low: str, terms: list[str]) -> int:
    """Where the first of `terms` occurs in lower-cased text (stem-blind: a word's
    prefix), or -1."""
    pos = -1
    for t in terms:
        probe = t if _HAS_CJK.match(t) else t[: max(3, len(t) - 2)]
        p = low.find(probe)
        if p != -1 and (pos == -1 or p < pos):
            pos = p
    return pos


def snippet(text: str, terms: list[str], width: int = 240) -> str:
    """A window of `text` around the first matched term (case-insensitive, stem-blind:
    a term matches as a prefix of a word), on one line. Only the stretch around the match
    of a long text is flattened (a hit can be a 16 KB tool output)."""
    cut_head = cut_tail = False
    if len(text) > 4 * width:
        low = text.lower()
        at = _first(low, terms) if len(low) == len(text) else -1
        start = max(0, at - 2 * width) if at != -1 else 0
        end = start + 4 * width
        cut_head, cut_tail = start > 0, end < len(text)
        text = text[start:end]
    flat = " ".join(text.split())
    if len(flat) <= width and not (cut_head or cut_tail):
        return flat
    pos = _first(flat.lower(), terms)
    if pos == -1:
        return ("…" if cut_head else "") + flat[: width - 1] + "…"
    start = max(0, pos - width // 3)
    end = min(len(flat), start + width)
    out = flat[start:end]
    return (("…" if start or cut_head else "") + out
            + ("…" if end < len(flat) or cut_tail else ""))

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
DUP_HEAD = 400  # characters of a unit compared for near-duplicate collapse


def dup_key(text: str) -> str:
    """The normalized head of a unit's text: near-identical units share it."""
    return _NON_WORD.sub(" ", text[:DUP_HEAD].casefold()).strip()


def dup_hash(text: str) -> int:
    """`dup_key` as a 64-bit number for the index (0: no key, nothing to collapse)."""
    key = dup_key(text)
    if not key:
        return 0
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") or 1
