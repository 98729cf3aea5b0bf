"""Corrections and preferences the user repeats across sessions gain weight.

A preference shown only by correcting the agent ("pnpm, not npm", "别用 print") often
carries no marker word; what marks it is that the user says it again in another session.
So every consolidation looks back over the user's own sentences of the last
`LOOKBACK_DAYS` and counts, for each sentence of the sessions at hand, the other
sessions that said the same thing (normalized near-duplicates: Latin words and CJK
bigrams, see scorer.features):
- a Q1 candidate said in other sessions too gains importance (one point per session, at
  most `MAX_BOOST`) and those sessions join its provenance;
- a sentence below the Q1 line but shaped like a standing rule (a correction, a
  contrast, a preference; not a question, not transient, not a one-off request, not
  pointing at the conversation: "no, not that one") becomes
  a Q1 candidate once it has been said in `MIN_SESSIONS` sessions. Its recurrence is
  measured here, so admission matches it as strictly as any new item (not as loosely as
  a correction marked "again", which is known to restate something).
Pure functions over rows the store returned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from memoryd.consolidate.admission import Candidate
from memoryd.consolidate.scorer import (
    Q1_MIN,
    SECRET,
    Scored,
    distinctive,
    features,
    pasted,
    score,
    similarity,
)
from memoryd.summarize.extractive import sentences

LOOKBACK_DAYS = 30
MIN_SESSIONS = 2  # this one and at least one other
MAX_BOOST = 3
SAME = 0.6  # Dice of two sentences' features: the same statement
SAME_OVERLAP = 0.25  # or two shared names (distinctive tokens) and this much overlap
_I = re.IGNORECASE
SHAPE = re.compile(
    r"\bnot\b|\bno\b|\binstead\b|\brather\b|\bonly\b|\bstop\b|\bdon'?t\b|\bnever\b|"
    r"\balways\b|\buse\b|\bprefer\b|\bwrong\b|\bkeep\b|\bstick (?:to|with)\b|"
    r"不是|不用|别|不要|应该|只用|换成|改成|统一|一律|都用|必须", _I)
# pointing at the conversation ("not that one, the other"): not a self-contained rule
DEICTIC = re.compile(r"\b(?:the other one|that one|this one|not that|not this|not there)\b|"
                     r"不是这个|不是那个|另一个|这个不对|那个不对", _I)


@dataclass(frozen=True)
class Statement:
    session_pk: int
    unit_id: int
    scored: Scored
    feats: frozenset[str]
    names: frozenset[str]


def statements(session_pk: int, unit_id: int, text: str) -> tuple[Statement, ...]:
    """The sentences of a user message that could be standing rules: Q1 already, or at
    least not negative and rule-shaped."""
    if pasted(text):  # a template a cron job sends again is not the user saying it again
        return ()
    out = []
    for sent in sentences(text):
        sc = score(sent)
        if not sc.text or sc.score < 0 or SECRET.search(sent):
            continue
        if not sc.q1 and (not SHAPE.search(sent) or DEICTIC.search(sent)):
            continue
        f = features(sc.text)
        if len(f) >= 2:
            out.append(Statement(session_pk, unit_id, sc, frozenset(f),
                                 frozenset(distinctive(f))))
    return tuple(out)


def same(a: Statement, b: Statement) -> bool:
    """Near-duplicates: most features shared, or two names and a fair share of the
    rest; never two statements that each name their own number, version or path
    ("dates as ISO 8601" is not "dates as RFC 3339"), nor two that name only other
    things ("格式化用 ruff" is not "格式化用 bun", however alike the Chinese around them),
    nor a change of rule and what it changes ("from today Vitest, Jest goes" is not "our
    tests are Jest": the session that said the old fact does not stand behind the new)."""
    if a.scored.change != b.scored.change:
        return False
    if _specific(a.names - b.names) and _specific(b.names - a.names):
        return False
    if a.names and b.names and not a.names & b.names:  # about other things
        return False
    if similarity(a.feats, b.feats) >= SAME:
        return True
    if len(a.names & b.names) < 2:
        return False
    return len(a.feats & b.feats) / min(len(a.feats), len(b.feats)) >= SAME_OVERLAP


def _specific(tokens: frozenset[str]) -> bool:
    """Numbers, versions, paths and formatted names (`3.9`, `src/lib`, `YYYY-MM-DD`)."""
    return any(any(ch.isdigit() or ch in "/-_." for ch in t) for t in tokens)


class Pool:
    """The look-back window's statements, indexed by feature."""

    def __init__(self, per_unit: Mapping[int, tuple[Statement, ...]]) -> None:
        self.per_unit = per_unit
        self.stmts = [st for sts in per_unit.values() for st in sts]
        self._index: dict[str, list[int]] = {}
        for i, st in enumerate(self.stmts):
            for f in st.feats:
                self._index.setdefault(f, []).append(i)

    def others(self, s: Statement) -> dict[int, list[int]]:
        """The other sessions that said the same as `s`: session pk -> unit ids."""
        near = {i for f in s.feats for i in self._index.get(f, ())}
        out: dict[int, list[int]] = {}
        for i in sorted(near):
            p = self.stmts[i]
            if p.session_pk != s.session_pk and same(s, p):
                ids = out.setdefault(p.session_pk, [])
                if p.unit_id not in ids:
                    ids.append(p.unit_id)
        return out


Make = Callable[[Scored, int], Candidate]


def apply(cands: list[Candidate], mine: Sequence[Statement], pool: Pool,
          make: Make) -> list[Candidate]:
    """`cands` (one session's) with the recurring ones weighted up, and the recurring
    rule-shaped sentences below the Q1 line added (`make` builds their Candidate)."""
    out = list(cands)
    by_unit: dict[int, list[Candidate]] = {}
    for c in out:
        for u in c.unit_ids[:1]:
            by_unit.setdefault(u, []).append(c)
    for s in mine:
        seen = pool.others(s)
        if not seen:
            continue
        n = len(seen) + 1
        boost = min(MAX_BOOST, n - 1)
        why = f"stated in {n} sessions +{boost}"
        hit = [c for c in by_unit.get(s.unit_id, []) if s.scored.text in c.text]
        if hit:
            for c in hit:
                if why not in c.reasons:
                    c.importance += boost
                    c.reasons = sorted({*c.reasons, why})
                _join(c, seen)
            continue
        if n < MIN_SESSIONS or s.scored.q1:
            continue
        c = make(s.scored, s.unit_id)
        c.importance = max(c.importance, Q1_MIN) + boost - 1
        c.reasons = sorted({*c.reasons, why})
        _join(c, seen)
        out.append(c)
        by_unit.setdefault(s.unit_id, []).append(c)
    return out


def _join(c: Candidate, seen: Mapping[int, list[int]]) -> None:
    have = {pk for pk, _ in c.evidence} | {c.session_pk}
    c.evidence += [(pk, ids) for pk, ids in seen.items() if pk not in have]
