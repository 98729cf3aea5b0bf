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


def term_pattern(terms: list[str]) -> re.Pattern[str] | None:
    """Matches as search matches them: a CJK term anywhere, a word term as the prefix of
    a word (the index stems, so 'tests' also finds 'testing')."""
    parts = []
    for t in sorted({t for t in terms if t.strip()}, key=len, reverse=True):
        if _CJK.search(t):
            parts.append(re.escape(t))
        else:
            parts.append(r"\b" + re.escape(t[: max(3, len(t) - 2)]) + r"\w*")
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def highlight(text: str | None, terms: list[str] | None) -> Markup:
    text = text or ""
    pat = term_pattern(terms or [])
    if pat is None:
        return escape(text)
    out, pos = [], 0
    for m in pat.finditer(text):
        if m.end() == m.start():
            continue
        out.append(escape(text[pos:m.start()]))
        out.append(Markup("<mark>") + escape(m.group(0)) + Markup("</mark>"))
        pos = m.end()
    out.append(escape(text[pos:]))
    return Markup("").join(out)


def is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def humanize(key: str) -> str:
    return str(key).replace("_", " ")


def make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("memoryd.web", "templates"),
        autoescape=True, undefined=jinja2.ChainableUndefined, trim_blocks=True,
        lstrip_blocks=True, enable_async=False)
    env.filters.update(when=when, ago=ago, highlight=highlight, humanize=humanize)
    env.tests["scalar"] = is_scalar
    env.tests["mapping"] = lambda v: isinstance(v, dict)
    return env
