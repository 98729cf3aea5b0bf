"""Fitting one context item into its token budget: encoded once, cut on a token boundary,
never inside a multi-byte character, as long as the budget allows."""

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.recall.fit import TRIM_MARK, Counts, _first_split, _last_split, _split_at, fit, fit_estimate
from memoryd.tokens import count_tokens, estimate_tokens, tokenizer_name


def _check(text: str, budget: int) -> str:
    out, trimmed = fit(text, budget)
    assert count_tokens(out) <= budget
    if not trimmed:
        assert out == text
        return out
    assert out.endswith(TRIM_MARK)
    assert text.startswith(out.removesuffix(TRIM_MARK))
    assert out.count("\ufffd") <= text.count("\ufffd")
    return out


def test_the_tokenizer_is_loaded():
    assert tokenizer_name() == "cl100k_base"  # else the tests below test the estimate


def test_cjk_and_emoji_are_never_split():
    text = ("迁移数据库的时候要先备份。😀🇨🇳 " * 4000)
    for budget in (24, 25, 26, 27, 100, 1001):
        out = _check(text, budget)
        assert count_tokens(out) >= budget - 12  # close to full, not a coarse cut


def test_a_long_latin_item_is_cut_at_a_word_end_close_to_the_budget():
    text = " ".join(f"word{i} and some ordinary prose" for i in range(20_000))  # ~100k tokens
    out = _check(text, 2000)
    assert count_tokens(out) >= 1900
    assert out.removesuffix(TRIM_MARK)[-1] != " "


def test_short_text_is_returned_whole():
    assert fit("hello 世界", 50) == ("hello 世界", False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=3000), st.integers(min_value=24, max_value=400))
def test_any_text_fits_its_budget(text, budget):
    _check(text, budget)


def test_the_estimate_path_still_fits():
    text = "迁移 database " * 3000
    out, trimmed = fit_estimate(text, 300)
    assert trimmed and out.endswith(TRIM_MARK) and text.startswith(out.removesuffix(TRIM_MARK))
    assert count_tokens(out) <= 300 or estimate_tokens(out) <= 300


def test_fixed_strings_are_counted_once_with_the_same_count():
    """The frame, headings and trim mark are counted once per tokenizer state: the same
    number `count_tokens` gives, without another trip through the encoder."""
    from memoryd import tokens

    text = "\n## Recalled from past sessions (a heading counted once)\n"
    assert tokens.count_fixed(text) == tokens.count_tokens(text)
    enc = tokens.encoding()
    calls = []
    real = enc.encode_ordinary
    enc.encode_ordinary = lambda t: calls.append(t) or real(t)
    try:
        assert tokens.count_fixed(text) == tokens.count_tokens(text)
    finally:
        del enc.encode_ordinary
    assert calls == [text]  # count_tokens encoded it; count_fixed did not


def _joined_matches(parts: list[str]) -> None:
    c = Counts()
    for p in parts:  # as the block is built: each part counted first
        c(p)
    assert c.joined(parts) == count_tokens("".join(parts)), parts


_SEAMS = ["", "\n", "\n\n", " ", ".", ")\n", "### User said — a · b\n", "12", "。", "\t",
          "'s", "   \n", "é", "\r\n"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=80), st.sampled_from(_SEAMS),
                          st.text(alphabet="ab1 .\n'#\r\t:é中", max_size=40)),
                max_size=12))
def test_a_block_counted_from_its_parts_counts_as_the_whole(parts):
    """`Counts.joined` counts a block from its parts' counts, encoding only the text
    around each seam, and always gives what encoding the whole block gives."""
    _joined_matches(parts)


def test_a_context_block_from_the_fixtures_counts_as_the_whole():
    root = Path(__file__).parents[1] / "fixtures" / "sessions"
    texts = [line[:2000] for f in sorted(root.rglob("*.jsonl"))
             for line in f.read_text(encoding="utf-8", errors="replace").splitlines()]
    rng = random.Random(5)
    for _ in range(400):
        t = rng.choice(texts)
        cuts = sorted(rng.sample(range(len(t) + 1), min(len(t) + 1, rng.randint(0, 6))))
        _joined_matches([t[a:b] + rng.choice(_SEAMS)
                         for a, b in zip([0, *cuts], [*cuts, len(t)], strict=True)])


def _scanned(text: str, places: range) -> list[int]:
    return [q for q in places if _split_at(text, q)]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(max_codepoint=0x80),
                                  st.sampled_from("é中。\u2028")), max_size=90),
       st.integers(1, 70))
def test_the_split_scan_finds_the_places_the_rule_names(text, limit):
    """`_first_split`/`_last_split` (a pattern over a text's ends) find the first and last
    place `_split_at` (the rule, character by character) names within `limit`."""
    first = _scanned(text, range(1, min(len(text), limit)))
    last = _scanned(text, range(max(0, len(text) - limit) + 1, len(text)))
    assert _first_split(text, limit) == (first[0] if first else None)
    assert _last_split(text, limit) == (last[-1] if last else None)
