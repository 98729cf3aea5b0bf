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


def clock(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M") if ts else "—"


def ago(ts: float | None) -> str:
    if not ts:
        return "—"
    d = time.time() - ts
    if d < 0:
        return "in " + _span(-d)
    return _span(d) + " ago"


def iso_ago(stamp: str | None) -> str:
    """An ISO 8601 time from the API ("2026-11-29T01:08:55+00:00") as "3 min ago"."""
    try:
        return ago(datetime.fromisoformat(stamp).timestamp()) if stamp else "—"
    except ValueError:
        return stamp or "—"


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


_TIME_KEY = re.compile(r"(?:^|_)(?:at|ts|since|time|when|last|next|sweep|release|"
                       r"started|ended|until|run)$")
_BYTES_KEY = re.compile(r"(?:^|_)bytes(?:_|$)|(?:^|_)size$|threshold$")
_SECONDS_KEY = re.compile(r"(?:_s|_seconds|seconds)$")


def size(n: float) -> str:
    """Bytes for people: 512 B, 34 kB, 13.4 MB, 2.1 GB."""
    for unit, k in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if abs(n) >= k:
            return f"{n / k:.1f} {unit}" if abs(n) < 10 * k else f"{n / k:.0f} {unit}"
    return f"{n:.0f} B"


def duration(s: float) -> str:
    """Seconds for people: 850 ms, 42 s, 3 min 5 s, 2 h 10 min."""
    if s == 0:
        return "0 s"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def pretty(v: Any, key: str = "") -> str:
    """A scalar for people, read with its key: epoch times as local time and how far off,
    byte counts and rates in kB/MB, seconds as durations, ISO timestamps as local time,
    floats short."""
    k = str(key).lower()
    if isinstance(v, int | float) and not isinstance(v, bool):
        if v > 1e9 and v < 1e10 and _TIME_KEY.search(k):
            return f"{when(v)} ({ago(v)})"
        if _BYTES_KEY.search(k):
            return size(v) + ("/s" if k.endswith("bytes_s") else "")
        if k.endswith("_mb"):
            return f"{v:.0f} MB" if v >= 10 else f"{v:.1f} MB"
        if k.endswith("_ms"):
            return duration(v / 1000)
        if _SECONDS_KEY.search(k) and v >= 0:
            return duration(v)
        if isinstance(v, int) and abs(v) >= 10_000:
            return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
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
    from memoryd.web.turns import markdown

    env.filters.update(when=when, clock=clock, ago=ago, iso_ago=iso_ago, highlight=highlight,
                       humanize=humanize, markdown=markdown,
                       pretty=pretty, inline=inline, size=size, duration=duration)
    env.tests["scalar"] = is_scalar
    env.tests["mapping"] = lambda v: isinstance(v, dict)
    return env
