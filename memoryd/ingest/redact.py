"""Secrets and blobs never reach storage.

Everything an adapter produces passes through `Redactor.clean` before it is stored,
summarized or sent anywhere: API keys and tokens, private keys, password assignments,
`<private>…</private>` spans, and base64 blobs (replaced by a placeholder with their
size).

Speed matters (every message of a backfill passes here), so each pattern is its own
regex guarded by the literals it cannot match without: a text that contains none of a
pattern's triggers (lower-cased) skips it, and patterns that start with a literal get
the regex engine's fast prefix scan. An alternation of all of them would be tried at
every character.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

REDACTED = "[REDACTED]"
_BLOB_MIN = 2000  # shorter base64 runs are not blobs
_ASSIGN_KEYS = (r"password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token"
                r"|client[_-]?secret|private[_-]?key|token")


@dataclass(frozen=True)
class _Rule:
    name: str
    rx: re.Pattern[str]
    triggers: tuple[str, ...] | None  # lower-case literals; None: always run
    min_len: int = 0


def _kb(b64_len: int) -> str:
    n = b64_len * 3 // 4
    return f"{n / 1024:.0f} KB" if n >= 1024 else f"{n} B"


def _dataurl(m: re.Match[str]) -> str:
    s = m.group()
    return f"[data {s[5 : s.index(';')]}, {_kb(len(s) - s.index(',') - 1)}]"


def _assign(m: re.Match[str]) -> str:
    a, b = m.span("value")
    off = m.start()
    return m.group()[: a - off] + REDACTED + m.group()[b - off :]


_REPLACE: dict[str, Callable[[re.Match[str]], str]] = {
    "private": lambda m: "[private]",
    "pkey": lambda m: "[REDACTED private key]",
    "dataurl": _dataurl,
    "blob": lambda m: f"[base64 data, {_kb(len(m.group()))}]",
    "assign": _assign,
}

_BUILTIN: list[tuple[str, str, tuple[str, ...] | None, int]] = [
    ("pkey", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
     ("private key",), 0),
    ("dataurl", r"data:[\w/+.-]{1,100};base64,[A-Za-z0-9+/=]{64,}", (";base64,",), 0),
    ("blob", r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{2000,}={0,2}", None, _BLOB_MIN),
    ("sk", r"\bsk-(?:ant-|proj-|or-|live-|test-)?[A-Za-z0-9_\-]{20,}", ("sk-",), 0),
    ("gh", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), 0),
    ("slack", r"\bxox[abprse]-[A-Za-z0-9-]{10,}", ("xox",), 0),
    ("aws", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", ("akia", "asia"), 0),
    ("gcp", r"\bAIza[0-9A-Za-z_\-]{35}\b", ("aiza",), 0),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", ("eyj",), 0),
    ("bearer", r"(?<=\b[Bb]earer )[A-Za-z0-9._~+/=-]{16,}", ("bearer ",), 0),
    ("assign", rf"(?i:(?:\b|_)(?:{_ASSIGN_KEYS}))[\"']?\s*[:=]\s*[\"']?"
               r"(?P<value>[^\s\"',;&]{4,})",
     ("passw", "pwd", "secret", "key", "token"), 0),
]


class Redactor:
    def __init__(self, extra_patterns: Iterable[str] = (),
                 private_tags: Iterable[str] = ("private",)) -> None:
        rules: list[_Rule] = []
        tags = [t for t in private_tags if t]
        if tags:
            alt = "|".join(re.escape(t) for t in tags)
            rules.append(_Rule("private", re.compile(
                rf"<(?P<tag>{alt})>[\s\S]*?(?:</(?P=tag)>|$)"),
                tuple(f"<{t.lower()}>" for t in tags)))
        rules += [_Rule(n, re.compile(rx), trig, min_len) for n, rx, trig, min_len in _BUILTIN]
        for i, rx in enumerate(extra_patterns):
            rules.append(_Rule(f"user{i}", re.compile(rx), None))  # bad pattern: fails at start
        self._rules = tuple(rules)

    def clean(self, text: str | None) -> str | None:
        if not text:
            return text
        low: str | None = None
        for rule in self._rules:
            if rule.min_len and len(text) < rule.min_len:
                continue
            if rule.triggers is not None:
                if low is None:
                    low = text.lower()
                if not any(t in low for t in rule.triggers):
                    continue
            new = rule.rx.sub(_REPLACE.get(rule.name, _redact_all), text)
            if new is not text:
                text, low = new, None
        return text


def _redact_all(m: re.Match[str]) -> str:
    return REDACTED
