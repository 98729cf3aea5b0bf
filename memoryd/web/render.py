"""Templates (Jinja2, autoescaped) and the small filters the pages use: times,
highlighted matches, generic rendering of status fields we do not know yet."""

from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any

import jinja2
from markupsafe import Markup, escape

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def when(ts: float | None) -> str:
    if not ts:
        return "—"
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def ago(ts: float | None) -> str:
    if not ts:
        return "—"
    d = time.time() - ts
    if d < 0:
        return "in " + _span(-d)
    return _span(d) + " ago"


def _span(s: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return f"{int(s // n)} {unit}"
    return f"{int(s)} s"


def term_patterns(terms: list[str]) -> list[re.Pattern[str]]:
    """Matches as search matches them: a CJK term anywhere, a word term as the prefix of
    a word (the index stems, so 'tests' also finds 'testing')."""
    out = []
    for t in {t.strip() for t in terms if t.strip()}:
        if _CJK.search(t):
            out.append(re.compile(re.escape(t), re.IGNORECASE))
        else:
            out.append(re.compile(r"\b" + re.escape(t[: max(3, len(t) - 2)]) + r"\w*",
                                  re.IGNORECASE))
    return out


def spans(text: str, terms: list[str]) -> list[tuple[int, int]]:
    """Where any term matches, overlapping matches merged (CJK terms come as
    overlapping bigrams: 数据 据库 库迁 迁移 → one span 数据库迁移)."""
    found = sorted((m.start(), m.end()) for p in term_patterns(terms)
                   for m in p.finditer(text) if m.end() > m.start())
    merged: list[tuple[int, int]] = []
    for a, b in found:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


def highlight(text: str | None, terms: list[str] | None) -> Markup:
    text = text or ""
    out, pos = [], 0
    for a, b in spans(text, terms or []):
        out.append(escape(text[pos:a]))
        out.append(Markup("<mark>") + escape(text[a:b]) + Markup("</mark>"))
        pos = b
    out.append(escape(text[pos:]))
    return Markup("").join(out)


def pretty(v: Any) -> str:
    """A scalar for people: ISO timestamps as local time and how far off, floats short."""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and "T" in v:
        try:
            ts = datetime.fromisoformat(v).timestamp()
        except ValueError:
            return v
        return f"{when(ts)} ({ago(ts)})"
    return str(v)


def inline(d: Any) -> str:
    """A flat mapping on one line: `bm25 content 13.3, same project 1.25`."""
    if not isinstance(d, dict):
        return pretty(d)
    return ", ".join(f"{humanize(k)} {pretty(v)}" for k, v in d.items())


def is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def humanize(key: str) -> str:
    return str(key).replace("_", " ")


def make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("memoryd.web", "templates"),
        autoescape=True, undefined=jinja2.ChainableUndefined, trim_blocks=True,
        lstrip_blocks=True, enable_async=False)
    env.filters.update(when=when, ago=ago, highlight=highlight, humanize=humanize,
                       pretty=pretty, inline=inline)
    env.tests["scalar"] = is_scalar
    env.tests["mapping"] = lambda v: isinstance(v, dict)
    return env
