"""The redactor's one pre-scan (`memoryd.redact.prescan`) never hides a match.

- every rule guarded by literals: each match of its Python pattern holds one of them,
  proved from the parsed pattern;
- every rule guarded by an RE2 gate: the gate matches every match drawn from the rule's
  pattern (non-ASCII letters, digits and case folds included);
- the assignment gate and the reversed scan that picks ASSIGN's starting places;
- the output: the same as every rule run on every text, over the real fixture
  transcripts' strings and planted secrets.
"""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path

import pytest
import re2

from memoryd.redact import CLI_TRIGGERS, HEAD, REDACTED, Redactor, assign, prescan
from memoryd.redact.rules import GATES, MIN_RUN, TOKENS
from tests.secrets_corpus import KINDS, ORDINARY
from tests.redact.test_redact import placements

_C = re._constants  # type: ignore[attr-defined]
_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT)
_ZERO_WIDTH = (_C.AT, _C.ASSERT, _C.ASSERT_NOT)
FIXTURES = Path(__file__).parents[1] / "fixtures" / "sessions"


# -- literals: a proof from the parsed pattern ---------------------------------------

def _heads(items: list) -> tuple[set[str], bool]:
    """Strings every match of `items` starts with; whether they are the whole match."""
    out = {""}
    for op, av in items:
        h, whole = _item_heads(op, av)
        out = {a + b for a in out for b in h}
        if not whole or len(out) > 512:
            return out, False
    return out, True


def _item_heads(op, av) -> tuple[set[str], bool]:
    if op is _C.LITERAL:
        return {chr(av)}, True
    if op is _C.IN and all(o is _C.LITERAL for o, _ in av):
        return {chr(c) for _, c in av}, True
    if op is _C.SUBPATTERN and not av[1] & re.IGNORECASE:
        return _heads(list(av[3]))
    if op is _C.BRANCH:
        parts = [_heads(list(p)) for p in av[1]]
        return set().union(*(h for h, _ in parts)), all(w for _, w in parts)
    if op in _REPEATS and av[0] >= 1:
        h, whole = _heads(list(av[2]))
        return h, whole and av[0] == av[1] == 1
    if op in _ZERO_WIDTH:
        return {""}, True
    return {""}, False


def _proves(items: list, ok) -> bool:
    """Every match of `items` holds a string `ok` accepts."""
    for k, (op, av) in enumerate(items):
        h, _ = _heads(items[k:])
        if "" not in h and all(ok(s) for s in h):
            return True
        if op is _C.BRANCH and all(_proves(list(p), ok) for p in av[1]):
            return True
        if op is _C.SUBPATTERN and not av[1] & re.IGNORECASE and _proves(list(av[3]), ok):
            return True
        if op in _REPEATS and av[0] >= 1 and _proves(list(av[2]), ok):
            return True
    return False


def _literal_rules() -> list[tuple[str, str, tuple[str, ...]]]:
    rows = [("private", r"<(?P<tag>private|secret)>[\s\S]*?(?:</(?P=tag)>|$)",
             ("<private>", "<secret>"))]
    rows += [(name, rx, trig) for name, rx, _, trig, _ in HEAD if trig]
    rows += [(name, rx, trig) for name, rx, trig, _ in TOKENS if name not in GATES]
    rows.append(("cli-flag", assign.CLI_FLAG.pattern, CLI_TRIGGERS))
    return rows


def test_every_literal_guarded_rule_holds_a_trigger_in_each_match():
    rows = _literal_rules()
    assert len(rows) >= 55
    for name, rx, triggers in rows:
        parsed = re._parser.parse(rx)  # type: ignore[attr-defined]
        assert not parsed.state.flags & re.IGNORECASE, name
        assert triggers, name
        assert _proves(list(parsed), lambda s, t=triggers: any(x in s for x in t)), name


def test_the_proof_refuses_a_trigger_a_match_can_lack():
    def ok(rx: str, trig: tuple[str, ...]) -> bool:
        return _proves(list(re._parser.parse(rx)),  # type: ignore[attr-defined]
                       lambda s: any(x in s for x in trig))
    assert ok(r"(?:\s-u|--user)[ =]x", ("-u",))
    assert not ok(r"(?:\s-u|--user)[ =]x", ("-u ", "--user"))  # the old trigger missed -u=
    assert not ok(r"[MNO][\w-]{23}\.[\w-]{6}\.", ("discord", "bot"))
    assert not ok(r"(?i:authorization): x", ("authorization",))
    assert ok(r"(?i:authorization): token", ("token",))
    assert not ok(r"sk-\w*", ("sk-x",))


def test_the_literals_are_found_in_any_text_around_them():
    r = Redactor()
    for i, rule in enumerate(r._rules):
        for t in rule.triggers:
            for around in ("{}", "x{}y", "中文{}😀", "\ud800{}"):
                assert i in r._scan.rules(around.format(t)), (rule.name, t, around)


# -- gates: matches drawn from the rules' own patterns ---------------------------------

_WORDS = "abcXYZ019_é中ßΩ"
_DIGITS = "0123456789٣९"
_SPACES = " \t\n\u3000\u00a0"
_POOL = "abcdefxyzABCDEFXYZ0123456789_-.:/+=\"'\\ \t@#?&;~%éΩ中٣İıſ\u212a"
_FOLD = {"i": "iIİı", "s": "sSſ", "k": "kK\u212a"}


def _draw(items, rng: random.Random, fold: bool = False) -> str:
    out = []
    for op, av in items:
        if op is _C.LITERAL:
            c = chr(av)
            out.append(rng.choice(_FOLD.get(c.lower(), c + c.upper() + c.lower())) if fold
                       else c)
        elif op is _C.IN:
            out.append(_draw_class(av, rng))
        elif op is _C.ANY or op is _C.NOT_LITERAL:
            out.append(rng.choice(_POOL))
        elif op is _C.BRANCH:
            out.append(_draw(list(rng.choice(av[1])), rng, fold))
        elif op is _C.SUBPATTERN:
            out.append(_draw(list(av[3]), rng, fold or bool(av[1] & re.IGNORECASE)))
        elif op in _REPEATS:
            lo, hi = av[0], av[1]
            n = rng.randint(lo, min(hi, lo + 4)) if rng.random() < 0.8 else lo
            out += [_draw(list(av[2]), rng, fold) for _ in range(n)]
        elif op is _C.GROUPREF_EXISTS:
            out.append(_draw(list(rng.choice([x for x in av[1:] if x is not None])), rng,
                             fold))
    return "".join(out)


def _draw_class(av, rng: random.Random) -> str:
    if av and av[0][0] is _C.NEGATE:
        return rng.choice(_POOL)  # the pattern's own search keeps only what fits
    o, v = rng.choice(av)
    if o is _C.LITERAL:
        return chr(v)
    if o is _C.RANGE:
        return chr(rng.randint(*v))
    if v is _C.CATEGORY_DIGIT:
        return rng.choice(_DIGITS)
    if v is _C.CATEGORY_WORD:
        return rng.choice(_WORDS)
    if v is _C.CATEGORY_SPACE:
        return rng.choice(_SPACES)
    return rng.choice(_POOL)


@pytest.mark.parametrize("name", sorted(GATES))
def test_each_gate_matches_every_match_of_its_rule(name):
    rx = next(rx for n, rx, *_ in TOKENS if n == name)
    pattern, parsed = re.compile(rx), re._parser.parse(rx)  # type: ignore[attr-defined]
    gate = re2.compile(GATES[name])
    rng = random.Random(name)
    checked = 0
    for _ in range(3000):
        s = _draw(list(parsed), rng)
        m = pattern.search(s)
        if m is None:
            continue
        checked += 1
        assert gate.search(m.group()) is not None, (name, m.group())
        if name in MIN_RUN:
            assert not any(c.isspace() for c in m.group()), (name, m.group())
            assert len(m.group()) >= MIN_RUN[name], (name, m.group())
    assert checked >= 300, (name, checked)


def test_the_case_folds_cover_every_code_point():
    """`any_case` takes each character Python's IGNORECASE or `str.lower` turns into an
    ASCII letter (assign lower-cases the text; auth-header-token is `(?i:...)`)."""
    chars = "".join(chr(cp) for cp in range(0x80, 0x110000) if not 0xD800 <= cp < 0xE000)
    folds: dict[str, set[str]] = {}
    for m in re.finditer("[a-z]", chars, re.I):
        c = m.group()
        folds.setdefault(next(x for x in "abcdefghijklmnopqrstuvwxyz"
                              if re.fullmatch(x, c, re.I)), set()).add(c)
    for c in chars:
        for x in c.replace("\u0130", "I").lower():
            if "a" <= x <= "z":
                folds.setdefault(x, set()).add(c)
            else:
                assert not x.isascii(), f"{c!r} lower-cases to ASCII {x!r}"
    assert folds.keys() == {"i", "k", "s"}  # the Kelvin sign, dotted and dotless i, long s
    for x, chars in folds.items():
        gate = re2.compile(prescan.any_case(x))
        assert all(gate.fullmatch(c) for c in chars), x


def test_the_assignment_gate_and_its_starting_places_never_hide_an_assignment():
    names = [*assign._KW_NAMES, "DB_PASSWORD", "api_key", "x-auth", "AccountKey", "my.secret",
             "PASSWORD", "Token", "\u212aEY", "SİG", "Credentials"]
    quotes = ["", '"', "'", '\\"', '\\\\"', "\\'"]
    seps = [":", "=", ":=", "=>"]
    blanks = ["", " ", "\t", "  "]
    gate = re2.compile(assign.GATE)
    checked = 0
    for name in names:
        for q1 in quotes:
            for sep in seps:
                for blank in blanks:
                    for around in ("{}", "note: x {} y", 'cfg = {{"a": 1, {}}}',
                                   "a=b; {} :: {}"):
                        body = f"{name}{q1}{blank}{sep}{blank}{q1}s3cr3tVALUE9x"
                        text = around.format(body, body) if around.count("{}") == 2 \
                            else around.format(body)
                        low = text.replace("\u0130", "I").lower()
                        if assign.ASSIGN.search(low) is None:
                            continue
                        checked += 1
                        assert gate.search(text) is not None, text
                        assert assign.redact(text) == _assign_every_place(text), text
    assert checked > 2000
    plain = "Note: the build at 10:42 took 3 = three minutes; see https://example.com/a?b=c"
    assert gate.search(plain) is None


def _assign_every_place(text: str) -> str:
    """`assign.redact` with ASSIGN searched at every position, as before the reversed scan."""
    low = text.lower()
    if len(low) != len(text):
        low = text.replace("\u0130", "I").lower()
    out: list[str] = []
    done = pos = 0
    while (m := assign.ASSIGN.search(low, pos)) is not None:
        a, b = m.span("value")
        pos = m.end("sep")
        if m.group("q") is None and assign._CHAINED.match(low, b):
            continue
        v = text[a:b].rstrip()
        if assign._secret(text, m, v):
            out += (text[done:a], REDACTED)
            done = pos = a + len(v)
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


# -- the output: as if every rule ran on every text -----------------------------------

def _every_rule(r: Redactor, text: str) -> str:
    for rule in r._rules:
        text = _assign_every_place(text) if rule.name == "assign" else rule.apply(text)
    return text


def _strings(v, out: list[str]) -> None:
    if isinstance(v, str):
        out.append(v)
    elif isinstance(v, dict):
        for x in v.values():
            _strings(x, out)
    elif isinstance(v, list):
        for x in v:
            _strings(x, out)


@functools.cache
def _fixture_texts() -> list[str]:
    out: list[str] = []
    for path in sorted(FIXTURES.rglob("*.json*")):
        for line in path.read_text("utf-8", errors="surrogateescape").splitlines():
            try:
                _strings(json.loads(line), out)
            except ValueError:
                continue
    return list(dict.fromkeys(t for t in out if len(t) > 3))


def test_the_output_is_every_rules_over_the_fixture_transcripts():
    texts = _fixture_texts()
    assert len(texts) > 2000 and sum(map(len, texts)) > 1_000_000
    r = Redactor(extra_patterns=[r"ACME-\d{6}"])
    differ = [t for t in texts if r.clean(t) != _every_rule(r, t)]
    assert not differ, differ[:3]


def test_the_output_is_every_rules_over_planted_secrets_and_ordinary_text():
    r = Redactor()
    rng = random.Random(11)
    fixture = _fixture_texts()
    texts = []
    for _, text, _ in KINDS:
        texts += placements(text).values()
        texts += [f"{rng.choice(fixture)[:500]}\n{text}\n{rng.choice(fixture)[:500]}"
                  for _ in range(5)]
    for text in ORDINARY:
        texts += placements(text).values()
    # shapes the old guards missed (a token inside a longer word, curl's -u=, a discord
    # bot token without "discord" or "bot", a folded "authorization")
    texts += ["cfg.sk-" + "a1B2c3D4e5F6g7H8i9J0k", "curl -u=deploy:Pw1234secret https://x",
              "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs x",
              "AUTHORİZATION: token abcdefghijklmnop1234"]
    for t in texts:
        assert r.clean(t) == _every_rule(r, t), t
    # each kept by the old guards, redacted now
    assert r.clean("cfg.sk-" + "a1B2c3D4e5F6g7H8i9J0k") == "cfg.[REDACTED]"
    assert r.clean("my-sk-" + "a1B2c3D4e5F6g7H8i9J0k") == "my-[REDACTED]"
    assert "Pw1234secret" not in r.clean("curl -u=deploy:Pw1234secret https://x")
    assert r.clean("MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs x") \
        == "[REDACTED] x"
    assert r.clean("AUTHORİZATION: token abcdefghijklmnop1234") \
        == "AUTHORİZATION: token [REDACTED]"


def test_a_text_with_a_lone_surrogate_is_scanned():
    r = Redactor()
    assert r.clean("\ud800 use sk-abcdefghijklmnopqrstuvwxyz0123") == "\ud800 use [REDACTED]"
    assert r.clean("plain \udcff text") == "plain \udcff text"
