"""Fitting a text into a token budget: the longest prefix, cut at a line or word end,
with a mark saying it was trimmed (`memoryd.context` fits every item of a context block)."""

from __future__ import annotations

from memoryd.tokens import count_fixed, count_tokens, encoding

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


def fit_counted(text: str, budget: int) -> tuple[str, bool, int]:
    """`fit`, and the tokens of what it returns."""
    enc = encoding()
    if enc is None:
        out, trimmed = fit_estimate(text, budget)
        return out, trimmed, count_tokens(out)
    head = text[: budget * HEAD_CHARS_PER_TOKEN]
    ids = enc.encode_ordinary(head)
    if len(ids) <= budget and len(head) < len(text):  # the head fits: is there more room?
        ids = enc.encode_ordinary(text)
    if len(ids) <= budget:
        return text, False, len(ids)
    keep = budget - count_fixed(TRIM_MARK)
    while keep > 0:
        raw = enc.decode_bytes(ids[:keep])
        cut = raw[: len(raw) - _partial_tail(raw)].decode("utf-8")
        out = _word_cut(cut) + TRIM_MARK
        n = count_tokens(out)
        over = n - budget  # tokens can merge across the cut: check
        if over <= 0:
            return out, True, n
        keep -= over
    out = TRIM_MARK.strip()
    return out, True, count_tokens(out)


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
