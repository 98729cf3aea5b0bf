"""Secrets assigned to names: `DB_PASSWORD=…`, `api_key: "…"`, `{\\"token\\": \\"…\\"}`,
`AccountKey=…;`, `--password …`.

One regex finds a key-like name followed by `=`, `:`, `:=` or `=>`, with quotes (escaped
any number of times, as in JSON inside a JSON string) on either side; `decide` then looks
at the whole name and the value and redacts the value (never the name):

- a strong name (password, secret, token, api key, private key, credentials, …) or any
  `UPPER_SNAKE` name ending in KEY/SECRET/TOKEN/PASSWORD (`.env` style): the value,
  unless it is plainly not a literal (a `$VAR`, a placeholder, a type, a variable or a
  call on the right of `=` in code);
- a weak name (`key`, `auth`, `signature`, `cookie`, …): only a high-entropy value, the
  way detect-secrets' keyword and entropy plugins judge it (hex ≥ 3.0, other ≥ 3.5 bits
  per character over at least 16 characters with letters and digits).
"""

from __future__ import annotations

import math
import re
from collections import Counter

from memoryd.redact.prescan import any_case
from memoryd.redact.rules import REDACTED

_SEP = r"[-_. ]?"
STRONG = ("passw(?:or)?d|passphrase|pwd|secret|token|credentials?|dsn"
          f"|api{_SEP}key|apikey|access{_SEP}key|account{_SEP}key|private{_SEP}key(?:{_SEP}id)?"
          f"|secret{_SEP}key|master{_SEP}key|signing{_SEP}key|encryption{_SEP}key"
          f"|auth{_SEP}key|session{_SEP}key|client{_SEP}secret|connection{_SEP}string"
          f"|database{_SEP}url|db{_SEP}url|webhook{_SEP}url")
WEAK = "key|auth|authorization|signature|sig|hmac|cookie|cred|pass|pw|salt"

# Run on the lower-cased text: the last word of a name (every STRONG and WEAK name ends
# with one of these), then the separator and the value. Plain literals in front let
# the regex engine skip most positions at once; the whole name is read back by hand.
ASSIGN = re.compile(
    r"(?P<kw>pass(?:w(?:or)?d|phrase)?|pwd|pw|secret|token|key(?:[-_. ]?id)?|cred(?:entials?)?"
    r"|dsn|auth(?:orization)?|sig(?:nature)?|hmac|cookie|salt|string|url)"
    r"(?P<q1>\\*[\"'])?[ \t]*(?P<sep>:=|=>|[:=])[ \t]*"
    r"(?P<q>\\*[\"'`])?(?P<value>(?(q)[^\"'`\\\n]{1,1000}|[^\s\"'`\\,;&]{1,1000}))")
CLI_FLAG = re.compile(
    r"--(?:password|passwd|pass|token|api-key|apikey|secret|client-secret|auth-token"
    r"|access-token|private-key)\s+(?P<q>[\"']?)(?P<value>[^\s\"'\\]{3,})")

# Every full name `kw` can match, for `GATE`.
_KW_NAMES = ("pass", "passwd", "password", "passphrase", "pwd", "pw", "secret", "token", "key",
             *(f"key{s}id" for s in ("", "-", "_", ".", " ")), "cred", "credential",
             "credentials", "dsn", "auth", "authorization", "sig", "signature", "hmac",
             "cookie", "salt", "string", "url")
# `ASSIGN`'s name, quote, blanks and the separator's first character, as an RE2 pattern
# for the redactor's one pre-scan (`memoryd.redact.prescan`) over the text as is: a text
# with no name right before a separator, most of them, never runs ASSIGN.
GATE = ("(?:" + "|".join(any_case(k) for k in _KW_NAMES) + ")"
        + r"(?:\\*[\"'])?[ \t]*[:=]")
# The same, reversed, for the lower-cased text read backwards: it starts at a `:` or `=`
# (the regex engine scans for those two characters and tries nothing else), and each of
# its matches ends where one of ASSIGN's can start. No name is a suffix of another, so a
# separator has one such place at most; `redact` tries ASSIGN there alone instead of at
# every letter of the text.
_MAYBE = re.compile(r"[:=][ \t]*(?:[\"']\\*)?(?:"
                    + "|".join(re.escape(k[::-1]) for k in _KW_NAMES) + ")")
_CHAINED = re.compile(r"[ \t]*(?::=|=>|[:=])")
_STRONG_RX = re.compile(rf"(?:{STRONG})\Z")
_WEAK_RX = re.compile(rf"(?:{WEAK})\Z")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9_]*\Z")
# not literals: types, empties, placeholders, references
_NOT_SECRET = frozenset({
    "str", "string", "bytes", "int", "bool", "boolean", "any", "none", "null", "nil",
    "undefined", "true", "false", "optional", "object", "number", "required", "secretstr",
    "redacted", "hidden", "masked", "xxx", "xxxx", "changeit", "env", "dict", "list",
})
_CODE_REF = re.compile(r"[A-Za-z_$][\w$]*(?:\.[\w$]+)*(?:[(\[].*)?\Z")
_TOKENISH = re.compile(r"[A-Za-z0-9+/=_.~:-]+\Z")


def entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def high_entropy(v: str) -> bool:
    if len(v) < 16 or not _TOKENISH.match(v):
        return False
    if not (any(c.isdigit() for c in v) and any(c.isalpha() for c in v)):
        return False
    is_hex = all(c in "0123456789abcdefABCDEF" for c in v)
    return entropy(v) >= (3.0 if is_hex else 3.5)


def _full_name(text: str, start: int, end: int) -> str:
    j = start
    while j > 0 and text[j - 1] in _NAME_CHARS:
        j -= 1
    return text[j:end]


def _placeholder(v: str) -> bool:
    low = v.lower()
    return (low in _NOT_SECRET or v.startswith(("$", "{{", "<", "[REDACTED", "[private",
                                                 "[data ", "[base64", "%(", "os.environ"))
            or set(v) <= set("*x.•-_ ") or len(v) < 3)


def redact(text: str, low: str | None = None) -> str:
    """`text` with the values of secret assignments replaced by REDACTED (`low`: its
    lower-cased copy, when the caller made one). The redactor calls it only on texts
    where `GATE` matches."""
    if low is None:
        low = text.lower()
    if len(low) != len(text):  # "İ" lower-cases to two characters; keep offsets aligned
        low = text.replace("\u0130", "I").lower()
    out: list[str] = []
    done = pos = 0
    n = len(low)
    for start in sorted(n - m.end() for m in _MAYBE.finditer(low[::-1])):
        # what `ASSIGN.search(low, pos)` finds, in order: its leftmost match
        if start < pos or (m := ASSIGN.match(low, start)) is None:
            continue
        a, b = m.span("value")
        pos = m.end("sep")  # a value may hold the next name: `key: AWS_SECRET = …`
        if m.group("q") is None and _CHAINED.match(low, b):
            continue
        v = text[a:b].rstrip()
        if _secret(text, m, v):
            out += (text[done:a], REDACTED)
            done = pos = a + len(v)
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _secret(text: str, m: re.Match[str], v: str) -> bool:
    if not v or _placeholder(v):
        return False
    kw_start, kw_end = m.span("kw")
    name = _full_name(text, kw_start, kw_end)
    low_name = name.lower()
    env = bool(_ENV_NAME.match(name)) and (
        name == text[kw_start:kw_end] or text[kw_start - 1] in "_-.")
    if env:
        return True  # .env style: DB_PASSWORD=…, SORT_KEY=…
    if _STRONG_RX.search(low_name) is None:
        return _WEAK_RX.search(low_name) is not None and high_entropy(v)
    quoted = m.group("q") is not None
    if not quoted and ("(" in v or "[" in v) and _CODE_REF.match(v):
        return False  # a call or a type: `token: Optional[str]`, `key=derive(x)`
    if quoted or m.group("sep") != "=":
        return True  # a quoted literal, or `password: …` as in YAML, JSON, headers
    # code: `token = get_token()` or `password = args.password` is a reference
    return not (_CODE_REF.match(v) and not high_entropy(v) and not any(c.isdigit() for c in v))


def cli_flag(m: re.Match[str]) -> str:
    v = m.group("value")
    if _placeholder(v):
        return m.group()
    a, b = m.span("value")
    off = m.start()
    return m.group()[: a - off] + REDACTED + m.group()[b - off:]
