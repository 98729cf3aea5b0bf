"""Which redaction rules can match in a text, in one pass over it.

Every rule is guarded by what each of its matches must hold: literals (`sk-`, `ghp_`,
`://`, `PRIVATE KEY`...) or, where no literal is certain, a small RE2 pattern (an
assignment's name before its separator). All of them go into one `re2.Set`, a DFA that
reads the text's UTF-8 once at C speed and says which guards occur; the redactor then
runs only those rules' Python regexes, and a text where no guard occurs (most of them)
costs that one pass. Measured in `bench/redact.py`: 5× an Aho–Corasick automaton
(pyahocorasick) and 10× a compiled alternation of the literals in `re`, on the same texts.

A set's DFA that fills its memory budget throws its cached states away and goes on (RE2
never gives up on a many-match search for being slow); it could fail only if one state
outgrew the budget, which a set of literals and short gates cannot. `Prescan.compile`
still checks, once, that the set finds every literal it was given.
"""

from __future__ import annotations

import re2


class Prescan:
    def __init__(self) -> None:
        self._set = re2.Set.SearchSet(re2.Options())
        self._owner: list[int] = []  # pattern index -> the rule it guards
        self._literals: list[str] = []

    def literal(self, text: str, rule: int) -> None:
        """`rule` runs on texts holding `text`, as is."""
        self.pattern("".join(c if c.isalnum() else _hex(c) for c in text), rule)
        self._literals.append(text)

    def pattern(self, rx: str, rule: int) -> None:
        """`rule` runs on texts where the RE2 pattern `rx` matches."""
        i = self._set.Add(rx)
        assert i == len(self._owner), (i, rx)
        self._owner.append(rule)

    def compile(self) -> None:
        self._set.Compile()
        for lit in self._literals:  # the set is whole (not cut short by its memory budget)
            if not self._set.Match(lit.encode("utf-8", "surrogatepass")):
                raise RuntimeError(f"redaction pre-scan misses its own literal {lit!r}")

    def rules(self, text: str) -> set[int]:
        """The rules whose guards occur in `text`."""
        hits = self._set.Match(text.encode("utf-8", "surrogatepass"))
        if not hits:
            return set()
        owner = self._owner
        return {owner[i] for i in hits}


# The characters besides a letter's two ASCII cases that Python's IGNORECASE matches to
# it, or `str.lower` turns into it ("İ" into "i" and a combining dot): tests check every
# code point.
_FOLDS = {"i": "\u0130\u0131", "k": "\u212a", "s": "\u017f"}


def any_case(name: str) -> str:
    """An RE2 pattern for the ASCII `name` in any case (a superset of Python's)."""
    return "".join(f"[{c}{c.upper()}{_FOLDS.get(c, '')}]" if c.isalpha() else _hex(c)
                   for c in name)


def _hex(c: str) -> str:
    return f"\\x{{{ord(c):x}}}"
