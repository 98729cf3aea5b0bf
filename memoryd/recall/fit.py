"""Fitting a text into a token budget: the longest prefix, cut at a line or word end,
with a mark saying it was trimmed (`memoryd.recall.context` fits every item of a context block)."""

from __future__ import annotations

import re

from memoryd.tokens import ENCODING, count_fixed, count_tokens, encoding

TRIM_MARK = " …[trimmed]"


def fit(text: str, budget: int) -> tuple[str, bool]:
    """The longest prefix of `text` (cut at a line or word end) within `budget` tokens.

    With the tokenizer loaded the text is encoded once and cut on a token boundary (never
    inside a multi-byte character); without it, a binary search on the estimate."""
    out, trimmed, _ = fit_counted(text, budget)
    return out, trimmed


HEAD_CHARS_PER_TOKEN = 6
"""A long text is encoded from a head of this many characters per token of room first
(text averages about 4): when the head alone is over the budget, the rest is never
encoded (a hit can be a 16 KB tool output fitted into a few hundred tokens)."""


def fit_counted(text: str, budget: int, counts: Counts | None = None
                ) -> tuple[str, bool, int]:
    """`fit`, and the tokens of what it returns (`counts`: a block's counts, which keep
    what was encoded here for the block's own count)."""
    enc = encoding()
    if enc is None:
        out, trimmed = fit_estimate(text, budget)
        return out, trimmed, count_tokens(out)
    c = counts or Counts()
    head = text[: budget * HEAD_CHARS_PER_TOKEN]
    ids = c.encode(head)
    if len(ids) <= budget and len(head) < len(text):  # the head fits: is there more room?
        ids = c.encode(text)
    if len(ids) <= budget:
        return text, False, len(ids)
    keep = budget - count_fixed(TRIM_MARK)
    while keep > 0:
        raw = enc.decode_bytes(ids[:keep])
        cut = raw[: len(raw) - _partial_tail(raw)].decode("utf-8")
        out = _word_cut(cut) + TRIM_MARK
        n = c(out)
        over = n - budget  # tokens can merge across the cut: check
        if over <= 0:
            return out, True, n
        keep -= over
    out = TRIM_MARK.strip()
    return out, True, c(out)


def _partial_tail(raw: bytes) -> int:
    """How many bytes at the end of `raw` begin a UTF-8 character they do not finish."""
    for back in range(1, min(4, len(raw)) + 1):
        b = raw[-back]
        if b & 0xC0 != 0x80:  # a lead byte (or ASCII): does the sequence fit?
            need = 1 if b < 0x80 else 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4
            return back if need > back else 0
    return 0


def _word_cut(cut: str) -> str:
    for sep in ("\n", " "):
        at = cut.rfind(sep)
        if at > len(cut) * 0.6:
            return cut[:at].rstrip()
    return cut.rstrip()


def fit_estimate(text: str, budget: int) -> tuple[str, bool]:
    if count_tokens(text) <= budget:
        return text, False
    lo, hi = 0, len(text)
    while lo < hi:  # binary search on characters
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid] + TRIM_MARK) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return _word_cut(text[:lo]) + TRIM_MARK, True


# -- counting a block from its parts -----------------------------------------------------

_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _split_at(text: str, q: int) -> bool:
    """Whether cl100k_base's pre-tokenizer always cuts `text` at `q`, whatever comes
    before and after: tokens never cross such a place, so the count of a text is the sum
    of the counts of its pieces between them. Judged from the two characters around `q`,
    ASCII only (its classes are the same in every Unicode version):

    - after an ASCII letter, before an ASCII non-letter (a run of letters is one piece);
    - after an ASCII digit, before an ASCII non-digit (digits go in runs of up to three);
    - after a newline, before an ASCII letter, digit or punctuation (a run of whitespace
      ending in a newline is one piece, at the end of a text too).

    The pattern: `'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+|
    ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s`."""
    a, b = text[q - 1], text[q]
    if not (a.isascii() and b.isascii()):
        return False
    if a.isalpha():
        return not b.isalpha()
    if a.isdigit():
        return not b.isdigit()
    return a == "\n" and (b.isalnum() or b in _PUNCT)


# `_split_at` as a pattern: the place between the two characters of a match (a lookahead:
# matches may overlap); scanning a text's ends with it costs a regex search instead of a
# Python call per character. `_LAST` ends where the last such place begins (`.*` backs off
# from the end).
_CUT = r"(?=[A-Za-z][\x00-@\[-`{-\x7f]|[0-9][\x00-/:-\x7f]|\n[!-~])"
_FIRST = re.compile(_CUT)
_LAST = re.compile(r"(?s:.*)" + _CUT)


def _first_split(text: str, limit: int = 64) -> int | None:
    """The first place in `text[:limit]` where the tokenizer always cuts (`_split_at`)."""
    m = _FIRST.search(text, 0, min(len(text), limit))
    return None if m is None else m.start() + 1


def _last_split(text: str, limit: int = 64) -> int | None:
    """The last place in `text[-limit:]` where the tokenizer always cuts (`_split_at`)."""
    m = _LAST.match(text, max(0, len(text) - limit))
    return None if m is None else m.end() + 1


SMALL_CHARS = 40
SMALL_KEPT = 4096
_small: dict[str, int] = {}
"""Counts of short texts, kept across blocks (the seams between a block's parts are the
same few strings again and again: ")\n\n### User", "said."; each trip through the encoder
costs ~40 µs whatever the text's length)."""


class Counts:
    """Exact token counts for one context block: each distinct text is encoded once, and
    the rendered block is counted from its parts (`joined`), encoding only the few
    characters around each seam instead of the whole block again (the block's final count
    was a third of a context request's tokenizer time)."""

    def __init__(self) -> None:
        self._memo: dict[str, int] = {}
        self.exact_joins = encoding() is not None and ENCODING == "cl100k_base"

    def __call__(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            if len(text) <= SMALL_CHARS:  # a seam's few characters: seen before, mostly
                n = _small.get(text)
                if n is None:
                    if len(_small) >= SMALL_KEPT:
                        _small.clear()
                    n = _small[text] = count_tokens(text)
            else:
                n = count_tokens(text)
            self._memo[text] = n
        return n

    def encode(self, text: str) -> list[int]:
        """The token ids of `text` (its count kept)."""
        enc = encoding()
        ids: list[int] = enc.encode_ordinary(text)
        self._memo[text] = len(ids)
        return ids

    def joined(self, parts: list[str]) -> int:
        """`count_tokens("".join(parts))`, from the parts' counts: a part's middle (from
        its first place the tokenizer always cuts to its last, `_split_at`) counts as in
        the part alone; what lies between two such places across a seam is encoded."""
        if not self.exact_joins:
            return count_tokens("".join(parts))
        total = 0
        pending: list[str] = []  # the text since the last cut, not yet counted
        for p in parts:
            if not p:
                continue
            first = _first_split(p)
            last = _last_split(p) if first is not None else None
            if first is None or last is None:
                pending.append(p)  # counted with what follows, up to the next cut
                continue
            head, tail = p[:first], p[last:]
            middle = self(p) - self(head) - self(tail)
            total += self("".join(pending) + head) + middle
            pending = [tail]
        return total + (self("".join(pending)) if pending else 0)
