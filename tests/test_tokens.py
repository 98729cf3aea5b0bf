"""`estimate_tokens`: the ingest's token estimate (no tokenizer), CJK counted per character."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoryd.tokens import estimate_tokens

CJK_RANGES = [(0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
              (0xAC00, 0xD7AF)]


def _by_character(text: str) -> int:
    """The estimate's definition, one character at a time: a CJK character (Han, kana,
    Hangul) is a token, any other four characters are one."""
    if not text:
        return 0
    cjk = sum(any(a <= ord(c) <= b for a, b in CJK_RANGES) for c in text)
    return cjk + (len(text) - cjk + 3) // 4


def test_cjk_characters_count_one_token_each_and_other_text_a_quarter():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("数据库迁移") == 5
    assert estimate_tokens("ひらがな カタカナ") == 8 + 1
    assert estimate_tokens("한국어 text 中文") == 5 + (6 + 3) // 4
    assert estimate_tokens("naïve café 🙂") == (12 + 3) // 4


@given(st.text(alphabet=st.one_of(
    st.characters(min_codepoint=0x3000, max_codepoint=0x4E10),
    st.characters(min_codepoint=0xAC00, max_codepoint=0xAC10),
    st.characters(min_codepoint=0xF8F0, max_codepoint=0xFB00),
    st.characters(codec="utf-8"))))
def test_the_estimate_is_the_per_character_definition(text: str):
    assert estimate_tokens(text) == _by_character(text)
