"""Token counts.

`count_tokens` uses a real BPE tokenizer (tiktoken's cl100k_base, the encoding litellm
ships offline with its package) so a context budget means what the model will see;
`estimate_tokens` is the dependency-free approximation used at ingest time (about four
characters per token for Latin text, one per CJK character), within ~20% of it.

The encoder is loaded when a budget is first counted, not at start, and costs ~45 MB:
tiktoken's Python dict of the 100k ranks (~14 MB, needed only to build the Rust encoder,
so it is dropped at once) and the Rust encoder's own tables. It is built here rather than
through `tiktoken.get_encoding`, whose registry would hold it for ever, so `release()`
can let it go when the daemon rests (`memoryd.runtime.idle_release`); the next count reloads it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import threading
from typing import Any

from memoryd.runtime.idle_release import RELEASE

log = logging.getLogger(__name__)

_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# the runs between CJK characters: what is left once they are removed is the CJK ones
_NOT_CJK_RUN = re.compile(f"[^{_CJK_CLASS}]+")
ENCODING = "cl100k_base"

_lock = threading.Lock()
_enc: Any = None        # the loaded tiktoken Encoding
_unavailable = False    # tried once and failed: estimates from then on
loads = 0               # how many times the encoder was built (bench, tests)


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    if text.isascii():  # most text, and a C-speed check: no CJK to count
        return (len(text) + 3) // 4
    # one string of the CJK characters, not a list of one string each (5-6x faster on
    # the ingest's non-ASCII texts: each CJK character was a new str object)
    cjk = len(_NOT_CJK_RUN.sub("", text))
    return cjk + (len(text) - cjk + 3) // 4


def encoding() -> Any:
    """cl100k_base from litellm's bundled tiktoken cache (no network), loaded on first use;
    None when there is no tokenizer (token counts are then estimates)."""
    global _enc, _unavailable, loads
    enc = _enc
    if enc is not None or _unavailable:
        return enc
    with _lock:
        if _enc is not None or _unavailable:
            return _enc
        try:
            _enc = _load()
            loads += 1
            RELEASE.register(release)
        except Exception as e:  # no tiktoken, or no cached encoding and no network
            log.warning("no tokenizer available (%s); token counts are estimates", e)
            _unavailable = True
        return _enc


def _load() -> Any:
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.origin and "TIKTOKEN_CACHE_DIR" not in os.environ:
        bundled = os.path.join(os.path.dirname(spec.origin), "litellm_core_utils", "tokenizers")
        if os.path.isdir(bundled):
            os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    import tiktoken
    from tiktoken_ext import openai_public

    enc = tiktoken.Encoding(**getattr(openai_public, ENCODING)())
    # the Rust encoder holds its own copy; the dict is read only to pickle the Encoding
    enc._mergeable_ranks = {}
    return enc


def release() -> bool:
    """Let the encoder go (the next count loads it again); True when one was loaded."""
    global _enc
    with _lock:
        had, _enc = _enc is not None, None
    return had


def loaded() -> bool:
    return _enc is not None


def tokenizer_name() -> str:
    return ENCODING if encoding() is not None else "estimate"


def count_tokens(text: str) -> int:
    if not text:
        return 0
    enc = encoding()
    # encode_ordinary: special tokens' text counted as text, as encode(...,
    # disallowed_special=()) does, without its special-token pass
    return len(enc.encode_ordinary(text)) if enc is not None else estimate_tokens(text)


_fixed: dict[tuple[str, bool], int] = {}


def count_fixed(text: str) -> int:
    """`count_tokens` of a constant string (the block's frame, a section heading, the
    trim mark), counted once: each count is a trip through the encoder, which lets go of
    the GIL and, on a busy machine, may wait to get it back."""
    key = (text, encoding() is not None)
    n = _fixed.get(key)
    if n is None:
        n = _fixed[key] = count_tokens(text)
    return n
