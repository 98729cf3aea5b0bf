"""Secrets and blobs never reach storage.

Everything an adapter produces passes through `Redactor.clean` before it is stored,
summarized or sent anywhere: API keys and tokens, private keys, password assignments,
`<private>…</private>` spans, and base64 blobs (replaced by a placeholder with their
size). One combined regex keeps this a single pass over the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_BUILTIN: list[tuple[str, str]] = [
    ("pkey", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"),
    ("dataurl", r"data:[\w/+.-]{1,100};base64,[A-Za-z0-9+/=]{64,}"),
    ("blob", r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{2000,}={0,2}"),
    ("sk", r"\bsk-(?:ant-|proj-|or-|live-|test-)?[A-Za-z0-9_\-]{20,}"),
    ("gh", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("slack", r"\bxox[abprse]-[A-Za-z0-9-]{10,}"),
    ("aws", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("gcp", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("bearer", r"(?<=\b[Bb]earer )[A-Za-z0-9._~+/=-]{16,}"),
    ("assign",
     r"(?i:(?:\b|_)(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token"
     r"|client[_-]?secret|private[_-]?key|token))[\"']?\s*[:=]\s*[\"']?"
     r"(?P<value>[^\s\"',;&]{4,})"),
]

REDACTED = "[REDACTED]"


class Redactor:
    def __init__(self, extra_patterns: Iterable[str] = (),
                 private_tags: Iterable[str] = ("private",)) -> None:
        parts = [f"(?P<{name}>{rx})" for name, rx in _BUILTIN]
        tags = [re.escape(t) for t in private_tags]
        if tags:
            alt = "|".join(tags)
            parts.insert(0, rf"(?P<private><(?P<tag>{alt})>[\s\S]*?(?:</(?P=tag)>|$))")
        for i, rx in enumerate(extra_patterns):
            re.compile(rx)  # fail loudly at startup on a bad user pattern
            parts.append(f"(?P<user{i}>{rx})")
        self._rx = re.compile("|".join(parts))

    def clean(self, text: str | None) -> str | None:
        if not text:
            return text
        return self._rx.sub(self._replace, text)

    @staticmethod
    def _replace(m: re.Match[str]) -> str:
        kind = m.lastgroup or ""
        if kind in ("private", "tag"):
            return "[private]"
        if kind == "pkey":
            return "[REDACTED private key]"
        if kind == "dataurl":
            s = m.group()
            mime = s[5 : s.index(";")]
            return f"[data {mime}, {_kb(len(s) - s.index(',') - 1)}]"
        if kind == "blob":
            return f"[base64 data, {_kb(len(m.group()))}]"
        if m.group("value") is not None and m.start("value") >= 0:
            s, (a, b) = m.group(), m.span("value")
            off = m.start()
            return s[: a - off] + REDACTED + s[b - off :]
        return REDACTED


def _kb(b64_len: int) -> str:
    n = b64_len * 3 // 4
    return f"{n / 1024:.0f} KB" if n >= 1024 else f"{n} B"
