"""Secrets and blobs never reach storage, logs or an LLM.

Everything an adapter produces passes through `Redactor.clean` before it is stored,
summarized or sent anywhere, and every log record through `Redactor.clean` as well
(`memoryd.log`): tokens of the kinds a secret scanner knows (`rules.TOKENS`), URL and
connection-string credentials, private key blocks, JWTs, secrets assigned to key-like
names in any syntax and any depth of JSON escaping (`assign`), `<private>…</private>`
spans, and base64 blobs (replaced by a placeholder with their size).

Speed matters (every message of a backfill passes here), so each rule is its own regex,
run only on texts that hold what every match of it must (`prescan`: one C-speed pass
over the text for all the rules' literals and gates). A text where none occurs, most of
them, costs that pass alone. `bench/redact.py` measures the cost.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memoryd.redact import assign, prescan
from memoryd.redact.rules import GATES, MIN_RUN, REDACTED, TOKENS

__all__ = ["REDACTED", "Redactor"]

_BLOB_MIN = 2000  # shorter base64 runs are not blobs


@dataclass(frozen=True)
class _Rule:
    name: str
    apply: Callable[[str], str]
    triggers: tuple[str, ...] = ()  # literals every match holds, as is
    gate: str | None = None  # or an RE2 pattern that matches wherever the rule can
    min_run: int = 0  # and a match holds no blank: texts without so long a run skip it


def _sub(rx: re.Pattern[str], replace: Callable[[re.Match[str]], str]) -> Callable[[str], str]:
    return lambda text: rx.sub(replace, text)


def _kb(b64_len: int) -> str:
    n = b64_len * 3 // 4
    return f"{n / 1024:.0f} KB" if n >= 1024 else f"{n} B"


def _dataurl(m: re.Match[str]) -> str:
    s = m.group()
    return f"[data {s[5 : s.index(';')]}, {_kb(len(s) - s.index(',') - 1)}]"


def _const(s: str) -> Callable[[re.Match[str]], str]:
    return lambda m: s


# every flag CLI_FLAG names starts with one of these
CLI_TRIGGERS = ("--pass", "--token", "--api-key", "--apikey", "--secret", "--client-secret",
                "--auth-token", "--access-token", "--private-key")


_PKEY = (r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
         r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)")
# (name, pattern, replacement, triggers, min_run); the Python patterns are kept here for
# the tests' proof that every match holds a trigger
HEAD = [
    ("pkey", _PKEY, _const("[REDACTED private key]"), ("PRIVATE KEY",), 0),
    ("dataurl", r"data:[\w/+.-]{1,100};base64,[A-Za-z0-9+/=]{64,}", _dataurl, (";base64,",), 0),
    ("blob", r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{2000,}={0,2}",
     lambda m: f"[base64 data, {_kb(len(m.group()))}]", (), _BLOB_MIN),  # no guard: min_run
]


class Redactor:
    def __init__(self, extra_patterns: Iterable[str] = (),
                 private_tags: Iterable[str] = ("private",)) -> None:
        rules: list[_Rule] = []  # blocks first: their insides must not be half-matched
        tags = [t for t in private_tags if t]
        if tags:
            alt = "|".join(re.escape(t) for t in tags)
            rx = re.compile(rf"<(?P<tag>{alt})>[\s\S]*?(?:</(?P=tag)>|$)")
            rules.append(_Rule("private", _sub(rx, _const("[private]")),
                               tuple(f"<{t}>" for t in tags)))
        for name, pattern, replace, triggers, min_run in HEAD:
            rules.append(_Rule(name, _sub(re.compile(pattern), replace), triggers,
                               min_run=min_run))
        for name, pattern, triggers, replace in TOKENS:
            gate = GATES.get(name)
            rules.append(_Rule(name, _sub(re.compile(pattern), replace),  # type: ignore[arg-type]
                               () if gate else triggers, gate, MIN_RUN.get(name, 0)))
        rules.append(_Rule("assign", assign.redact, gate=assign.GATE))
        rules.append(_Rule("cli-flag", _sub(assign.CLI_FLAG, assign.cli_flag), CLI_TRIGGERS))
        rules += [_Rule(f"user{i}", _sub(re.compile(rx), _const(REDACTED)))
                  for i, rx in enumerate(extra_patterns)]  # a bad one fails here
        self._rules = tuple(rules)
        self._scan = prescan.Prescan()
        unguarded: list[tuple[int, int]] = []
        for i, rule in enumerate(rules):
            for t in rule.triggers:
                self._scan.literal(t, i)
            if rule.gate is not None:
                self._scan.pattern(rule.gate, i)
            if not rule.triggers and rule.gate is None:
                unguarded.append((i, rule.min_run))
        self._scan.compile()
        self._unguarded = tuple(unguarded)
        self._min_run = {i: r.min_run for i, r in enumerate(rules) if r.min_run}

    @property
    def rule_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self._rules)

    def clean(self, text: str | None) -> str | None:
        if not text:
            return text
        todo = self._scan.rules(text)
        n = len(text)
        for i, min_run in self._unguarded:
            if n >= min_run:
                todo.add(i)
        if not todo:
            return text
        min_runs = self._min_run
        if not todo.isdisjoint(min_runs):  # split only texts long enough for one
            run = _longest_run(text) if any(min_runs.get(i, n + 1) <= n for i in todo) else 0
            todo = {i for i in todo if min_runs.get(i, 0) <= run}
        rules = self._rules
        for i in sorted(todo):  # in the rules' order, as if every rule ran on every text
            text = rules[i].apply(text)
        return text


def _longest_run(text: str) -> int:
    """The length of the longest run of non-blank characters in `text`."""
    return max(map(len, text.split()), default=0)
