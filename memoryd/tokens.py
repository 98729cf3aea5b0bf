"""Token counts.

`count_tokens` uses a real BPE tokenizer (tiktoken's cl100k_base, the encoding litellm
ships offline with its package) so a context budget means what the model will see;
`estimate_tokens` is the dependency-free approximation used at ingest time (about four
characters per token for Latin text, one per CJK character), within ~20% of it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
from collections.abc import Callable
from functools import lru_cache

log = logging.getLogger(__name__)

_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    return cjk + (len(text) - cjk + 3) // 4


@lru_cache(maxsize=1)
def _encoder() -> Callable[[str], int] | None:
    """cl100k_base from litellm's bundled tiktoken cache (no network), or None."""
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.origin and "TIKTOKEN_CACHE_DIR" not in os.environ:
        bundled = os.path.join(os.path.dirname(spec.origin), "litellm_core_utils", "tokenizers")
        if os.path.isdir(bundled):
            os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base")
    except Exception as e:  # no tiktoken, or no cached encoding and no network
        log.warning("no tokenizer available (%s); token counts are estimates", e)
        return None
    return lambda text: len(enc.encode(text, disallowed_special=()))


def tokenizer_name() -> str:
    return "cl100k_base" if _encoder() is not None else "estimate"


def count_tokens(text: str) -> int:
    if not text:
        return 0
    enc = _encoder()
    return enc(text) if enc is not None else estimate_tokens(text)
