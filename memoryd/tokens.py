"""Token estimates without a tokenizer dependency: about four characters per token
for Latin text, one token per CJK character (what BPE tokenizers give on average)."""

from __future__ import annotations

import re

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4
