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

import functools
import hashlib
import re

from memoryd.index.stopwords import STOP_WORDS

# Han (incl. extension A and compatibility), kana, CJK punctuation excluded.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TERM = re.compile(f"[{_CJK}]+|[^\\W_]+(?:['’][^\\W_]+)*", re.UNICODE)
_HAS_CJK = re.compile(f"[{_CJK}]")
# a word with a lower-to-upper case change inside it, and the parts it splits into
_CAMEL_WORD = re.compile(r"\b[A-Za-z]*[a-z][A-Z][A-Za-z]*\b")
_CAMEL_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_LOWER_UPPER = re.compile(r"[a-z][A-Z]")  # what `has_lower_upper` answers, faster
_CASE_CLASSES = bytes(ord("a") if 97 <= b <= 122 else ord("A") if 65 <= b <= 90 else 32
                      for b in range(256))

def bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]


def has_lower_upper(text: str) -> bool:
    """Whether an ASCII lower-case letter is followed by an upper-case one anywhere in
    `text` (`_LOWER_UPPER.search`, 20-50x faster): on the UTF-8 bytes mapped to "a",
    "A" and " " by one `bytes.translate`. A multi-byte character has no ASCII byte in
    it, so two adjacent ASCII bytes are two adjacent characters."""
    return b"aA" in text.encode("utf-8", "surrogatepass").translate(_CASE_CLASSES)


def camel_parts(text: str) -> list[str]:
    """The parts of the camelCase words in `text`, in order ("iPhone" -> "i", "Phone")."""
    parts: list[str] = []
    if not has_lower_upper(text):
        return parts
    for m in _CAMEL_WORD.finditer(text):
        parts += _CAMEL_PART.findall(m.group())
    return parts


def index_text(text: str) -> str:
    """Text as the index should see it: CJK runs replaced by their bigrams, and the parts of
    camelCase words appended (after the text, so phrases in it stay contiguous)."""
    if not text.isascii() and _HAS_CJK.search(text):
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


def _probe(term: str) -> str:
    """What of a term `_first` looks for: a CJK term whole, another its stem-blind head."""
    return term if _HAS_CJK.match(term) else term[: max(3, len(term) - 2)]


@functools.lru_cache(maxsize=256)
def _probes(terms: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    """The terms' probes, and whether each is a non-empty run without whitespace (what
    `_ascii_window` needs), kept: a search's 15 snippets ask for the same terms'."""
    probes = tuple(_probe(t) for t in terms)
    return probes, all(p.split() == [p] for p in probes)


def _first(low: str, probes: tuple[str, ...]) -> int:
    """Where the first of the probes (`_probes`) occurs in lower-cased text, or -1."""
    pos = -1
    for probe in probes:
        p = low.find(probe)
        if p != -1 and (pos == -1 or p < pos):
            pos = p
    return pos


def snippet(text: str, terms: list[str], width: int = 240) -> str:
    """A window of `text` around the first matched term (case-insensitive, stem-blind:
    a term matches as a prefix of a word), on one line. Only the stretch around the match
    of a long text is flattened (a hit can be a 16 KB tool output)."""
    probes, plain = _probes(tuple(terms))
    cut_head = cut_tail = False
    if len(text) > 4 * width:
        low = text.lower()
        at = _first(low, probes) if len(low) == len(text) else -1
        start = max(0, at - 2 * width) if at != -1 else 0
        end = start + 4 * width
        cut_head, cut_tail = start > 0, end < len(text)
        text = text[start:end]
        if at != -1 and plain and text.isascii():
            # ASCII: the stretch lower-cases as the whole text did, so its first match is
            # at `at`, unless the stretch's end cuts every probe found there
            fits = any(at + len(p) <= end and low.startswith(p, at) for p in probes)
            got = _ascii_window(text, at - start if fits else _first(text.lower(), probes),
                                width)
            if got is not None:
                out, cut_l, cut_r = got
                return (("…" if cut_l or cut_head else "") + out
                        + ("…" if cut_r or cut_tail else ""))
    flat = " ".join(text.split())
    if len(flat) <= width and not (cut_head or cut_tail):
        return flat
    pos = _first(flat.lower(), probes)
    if pos == -1:
        return ("…" if cut_head else "") + flat[: width - 1] + "…"
    start = max(0, pos - width // 3)
    end = min(len(flat), start + width)
    out = flat[start:end]
    return (("…" if start or cut_head else "") + out
            + ("…" if end < len(flat) or cut_tail else ""))


def _ascii_window(text: str, a: int, width: int) -> tuple[str, bool, bool] | None:
    """`snippet`'s window of ASCII `text` flattened (its whitespace runs as one space),
    and whether the flattened text goes on before it and after it, from the stretch
    around its first match alone (at `a`): flattening all of a long hit's 960 characters
    to show 240 was two thirds of a snippet's time. ASCII lower-cases and flattens
    character by character, and a probe holds no whitespace, so the first match in the
    flattened text is the first in `text`. None when that stretch cannot say (no match;
    a run of whitespace longer than the stretch): flatten it all."""
    if a == -1:
        return None
    back = width // 3
    b = max(0, a - back - back // 2)
    words = text[b:a].split()
    left = " ".join(words) + (" " if words and text[a - 1].isspace() else "")
    if len(left) > back:
        left, cut_l = left[-back:], True
    elif b == 0:
        cut_l = False
    else:
        return None
    need = width - len(left)
    c = min(len(text), a + need + need // 2)
    right = " ".join(text[a:c].split())
    if len(right) > need:
        return left + right[:need], cut_l, True
    if c == len(text):
        return left + right, cut_l, False
    return None


_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
DUP_HEAD = 400  # characters of a unit compared for near-duplicate collapse


# ASCII letters and digits lower-cased, every other byte a space: `dup_key` of ASCII text
_ASCII_WORD_BYTES = bytes(b + 32 if 65 <= b <= 90 else b if 97 <= b <= 122 or 48 <= b <= 57
                          else 32 for b in range(128)) + b" " * 128


_SPACE_RUN = re.compile(rb"  +")


def _dup_bytes(text: str) -> bytes:
    """`dup_key` as UTF-8. ASCII (most heads) takes one `bytes.translate` (for ASCII,
    casefold is lower and `[\\W_]` is everything but letters and digits) and one regex
    joining runs of spaces (2.2 us a head against a split and join's 3.0: most words
    are one space apart already; bench/README, branch `bcpu`); anything else the regex."""
    head = text[:DUP_HEAD]
    if head.isascii():
        return _SPACE_RUN.sub(b" ", head.encode().translate(_ASCII_WORD_BYTES)).strip()
    return _NON_WORD.sub(" ", head.casefold()).strip().encode()


def dup_key(text: str) -> str:
    """The normalized head of a unit's text: near-identical units share it."""
    head = text[:DUP_HEAD]
    if head.isascii():
        return _dup_bytes(head).decode()
    return _NON_WORD.sub(" ", head.casefold()).strip()


def dup_hash(text: str) -> int:
    """`dup_key` as a 64-bit number for the index (0: no key, nothing to collapse)."""
    key = _dup_bytes(text)
    if not key:
        return 0
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") or 1
