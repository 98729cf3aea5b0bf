"""Secrets and blobs never reach storage, logs or an LLM.

Everything an adapter produces passes through `Redactor.clean` before it is stored,
summarized or sent anywhere, and every log record through `Redactor.clean` as well
(`memoryd.log`): tokens of the kinds a secret scanner knows (`rules.TOKENS`), URL and
connection-string credentials, private key blocks, JWTs, secrets assigned to key-like
names in any syntax and any depth of JSON escaping (`assign`), `<private>…</private>`
spans, and base64 blobs (replaced by a placeholder with their size).

Speed matters (every message of a backfill passes here), so each pattern is its own
regex guarded by the literals it cannot match without: a text that contains none of a
pattern's triggers skips it, and patterns that start with a literal get the regex
engine's fast prefix scan. An alternation of all of them would be tried at every
character. `bench/redact.py` measures the cost.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memoryd.redact import assign
from memoryd.redact.rules import REDACTED, TOKENS

__all__ = ["REDACTED", "Redactor"]

_BLOB_MIN = 2000  # shorter base64 runs are not blobs


@dataclass(frozen=True)
class _Rule:
    name: str
    rx: re.Pattern[str]
    replace: Callable[[re.Match[str]], str]
    triggers: tuple[str, ...] | None  # None: always run
    exact: bool = False  # triggers are case-sensitive (searched in the text as is)
    min_len: int = 0


def _kb(b64_len: int) -> str:
    n = b64_len * 3 // 4
    return f"{n / 1024:.0f} KB" if n >= 1024 else f"{n} B"


def _dataurl(m: re.Match[str]) -> str:
    s = m.group()
    return f"[data {s[5 : s.index(';')]}, {_kb(len(s) - s.index(',') - 1)}]"


def _const(s: str) -> Callable[[re.Match[str]], str]:
    return lambda m: s


_PKEY = (r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
         r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)")

# blocks first: their insides must not be half-matched by the token rules
_HEAD: list[_Rule] = [
    _Rule("pkey", re.compile(_PKEY), _const("[REDACTED private key]"), ("private key",)),
    _Rule("dataurl", re.compile(r"data:[\w/+.-]{1,100};base64,[A-Za-z0-9+/=]{64,}"), _dataurl,
          (";base64,",)),
    _Rule("blob", re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{2000,}={0,2}"),
          lambda m: f"[base64 data, {_kb(len(m.group()))}]", None, min_len=_BLOB_MIN),
]
# the words a prefixed token can start: one regex pass finds them all, and a dict of
# their first two characters says which prefix rules can match (instead of one
# substring search per trigger per text)
_WORDS = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-.+]{13,}")
_CLI = _Rule("cli-flag", assign.CLI_FLAG, assign.cli_flag, ("--",), exact=True)


class Redactor:
    def __init__(self, extra_patterns: Iterable[str] = (),
                 private_tags: Iterable[str] = ("private",)) -> None:
        head: list[_Rule] = []
        tags = [t for t in private_tags if t]
        if tags:
            alt = "|".join(re.escape(t) for t in tags)
            head.append(_Rule("private", re.compile(
                rf"<(?P<tag>{alt})>[\s\S]*?(?:</(?P=tag)>|$)"), _const("[private]"),
                tuple(f"<{t.lower()}>" for t in tags)))
        self._head = tuple(head + _HEAD)
        tokens: list[_Rule] = []
        by_prefix: dict[str, list[tuple[str, int]]] = {}
        for name, rx, trig, kind, fn in TOKENS:
            i = len(tokens)
            tokens.append(_Rule(name, re.compile(rx), fn,  # type: ignore[arg-type]
                                trig, exact=kind != "itext"))
            if kind == "prefix":
                for t in trig:
                    by_prefix.setdefault(t[:2], []).append((t, i))
        self._tokens = tuple(tokens)
        self._by_prefix = by_prefix
        # the other token rules' triggers, flat: one substring search each, in the text as
        # is (exact) or lower-cased, in a plain loop (a generator per rule per text cost
        # more than the searches themselves)
        in_text = [i for i, (*_, kind, _fn) in enumerate(TOKENS) if kind != "prefix"]
        self._exact_triggers = tuple((t, i) for i in in_text if tokens[i].exact
                                     for t in tokens[i].triggers or ())
        self._lower_triggers = tuple((t, i) for i in in_text if not tokens[i].exact
                                     for t in tokens[i].triggers or ())
        self._user = tuple(_Rule(f"user{i}", re.compile(rx), _const(REDACTED), None)
                           for i, rx in enumerate(extra_patterns))  # a bad one fails here

    @property
    def rule_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in (*self._head, *self._tokens, _CLI, *self._user)) + (
            "assign",)

    def clean(self, text: str | None) -> str | None:
        if not text:
            return text
        low: str | None = None
        for rule in self._head:
            if rule.min_len and len(text) < rule.min_len:
                continue
            if rule.triggers is not None:
                if low is None:
                    low = text.lower()
                for t in rule.triggers:  # a plain loop: `any` over a generator cost more
                    if t in low:
                        break
                else:
                    continue
            new = rule.rx.sub(rule.replace, text)
            if new is not text:
                text, low = new, None
        if len(text) >= 14:
            new = self._clean_tokens(text, low)
            if new is not text:
                text, low = new, None
        if "=" in text or ":" in text:
            text = assign.redact(text, low)
        if "--" in text:
            text = _CLI.rx.sub(_CLI.replace, text)
        for rule in self._user:
            text = rule.rx.sub(rule.replace, text)
        return text

    def _clean_tokens(self, text: str, low: str | None) -> str:
        """`text` with the token rules applied (`low`: its lower-cased copy, if made)."""
        hits: set[int] = set()
        by_prefix = self._by_prefix
        for w in _WORDS.findall(text):
            for prefix, i in by_prefix.get(w[:2], ()):
                if w.startswith(prefix):
                    hits.add(i)
        for t, i in self._exact_triggers:
            if t in text:
                hits.add(i)
        if self._lower_triggers:
            if low is None:
                low = text.lower()
            for t, i in self._lower_triggers:
                if t in low:
                    hits.add(i)
        for i in sorted(hits):
            rule = self._tokens[i]
            text = rule.rx.sub(rule.replace, text)
        return text
