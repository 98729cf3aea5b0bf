"""MEMORY.md admission, planned as a pure function of the file's current text.

For each Q1 candidate, against the entries now in the file:
- the same item, or one at least `similarity` alike (Dice over words and CJK bigrams),
  or a restatement (a repeated correction, or the same names, versions and paths) ->
  confirm the entry: provenance gains the session, the line stays as the user sees it;
- an item that says the rule changed ("from now on", "instead of", "作废", ...) and is
  about the same thing as an entry -> supersede: the old item leaves MEMORY.md for
  HISTORY.md with a pointer to its successor, the new one is added;
- otherwise -> a new line `YYYY-MM-DD|source|item`.
Then the cap: past `max_entries`, and for low-importance entries past the TTL, the least
useful entries made by memoryd are demoted to HISTORY.md. Entries the user wrote (no
provenance) are never demoted or superseded automatically.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryd.memory import history
from memoryd.consolidate.scorer import distinctive, features, overlap, similarity
from memoryd.consolidate.subjects import KINDS, Subject, agrees, conflict, subjects
from memoryd.memory.document import Document, Entry, format_entry, item_key

RESTATE_OVERLAP = 0.6
SUPERSEDE_OVERLAP = 0.3
TTL_IMPORTANCE = 5  # entries scoring below this expire after ttl_days unconfirmed


@dataclass
class Candidate:
    text: str
    importance: int
    source: str  # "agent" (user-wide) or "agent:project"
    scope: str | None  # project name, None: user-wide
    session_pk: int | None
    unit_ids: list[int]
    reasons: list[str] = field(default_factory=list)
    repeat: bool = False
    change: bool = False
    made_by: str = "extractive"
    prompt_version: str = "admission-2"
    subject: str | None = None  # what it is about, as a model named it (consolidate.model)
    # other sessions that said the same (consolidate.recurrence): (session pk, unit ids)
    evidence: list[tuple[int, list[int]]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return item_key(self.text)


@dataclass
class Action:
    action: str  # added | confirmed | superseded | demoted | dropped
    item: str
    why: str
    line: int | None = None
    entry: str | None = None  # the entry acted on
    successor: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Plan:
    lines: list[str] | None  # None: MEMORY.md unchanged
    actions: list[Action]
    history: list[str]
    confirmed: list[tuple[Candidate, str]]  # (candidate, key of the entry it confirms)
    added: list[Candidate]
    gone: list[tuple[str, str, str | None]]  # (item key, new state, successor key)


def _scope_of(e: Entry) -> str | None:
    _, sep, project = e.source.partition(":")
    return project if sep else None


def _same_scope(c: Candidate, e: Entry) -> bool:
    return _scope_of(e) in (None, c.scope) or c.scope is None


def plan(doc: Document, cands: Sequence[Candidate], day: dt.date, *,
         provenance: Mapping[str, Mapping[str, Any]], similar: float = 0.8,
         max_entries: int = 200, ttl_days: int = 0,
         active_days: Sequence[str] | None = None) -> Plan:
    """`active_days`: the days the history has sessions on, up to `day` (ISO dates,
    sorted); the TTL counts those, so a history consolidated long after it was written
    (a backfill) or a user back from months away does not find its memory expired.
    None: calendar days."""
    lines = list(doc.lines)
    entries = list(doc.entries)
    items: dict[int, list[str]] = {e.line: list(e.items) for e in entries}
    p = Plan(None, [], [], [], [], [])
    changed = False
    iso = day.isoformat()

    def all_items() -> list[tuple[Entry, str]]:
        return [(e, it) for e in entries for it in items.get(e.line, [])]

    for c in cands:
        fc = features(c.text)
        exact = next(((e, it) for e, it in all_items() if item_key(it) == c.key), None)
        if exact is not None:
            p.confirmed.append((c, item_key(exact[1])))
            p.actions.append(Action("confirmed", c.text, "already in MEMORY.md", exact[0].line))
            continue
        scored = [(similarity(fc, features(it)), overlap(fc, features(it)), e, it)
                  for e, it in all_items() if _same_scope(c, e)]
        made = {**provenance, **{a.key: {} for a in p.added}}  # this run's are ours too
        stale, same = _by_subject(c, scored, made)
        later = next(((e, it) for e, it, _ in stale if _said_later(made, it, iso)), None)
        if later is None and c.change:
            target = _supersede_target(c, scored, made)
            later = target if target and _said_later(made, target[1], iso) else None
        if later is not None:
            _older(p, c, day, *later)
            continue
        if stale:
            for e, it, why in stale:
                items[e.line].remove(it)
                entry_text = format_entry(dt.date.fromisoformat(e.date), e.source, [it])
                p.history.append(history.superseded_line(iso, entry_text, c.text,
                                                         f"MEMORY.md, {c.source}"))
                p.gone.append((item_key(it), "superseded", c.key))
                p.actions.append(Action("superseded", it, why, e.line, entry_text, c.text))
            changed = True
            lines, entries, items = _add(lines, entries, items, iso, c)
            p.added.append(c)
            p.actions.append(Action("added", c.text, "; ".join(c.reasons) or "admitted",
                                    len(lines)))
            continue
        if same is not None:
            e, it, why = same
            p.confirmed.append((c, item_key(it)))
            p.actions.append(Action("confirmed", c.text, why, e.line, it))
            continue
        best = max(scored, key=lambda x: (x[0], x[1]), default=None)
        if best is not None and best[0] >= similar and not _other_fact(c.text, best[3]):
            p.confirmed.append((c, item_key(best[3])))
            p.actions.append(Action("confirmed", c.text, f"similar ({best[0]:.2f}) to line "
                                    f"{best[2].line}", best[2].line, best[3]))
            continue
        if c.change:
            target = _supersede_target(c, scored, made)
            if target is not None:
                e, it = target
                items[e.line].remove(it)
                entry_text = format_entry(dt.date.fromisoformat(e.date), e.source, [it])
                p.history.append(history.superseded_line(iso, entry_text, c.text,
                                                         f"MEMORY.md, {c.source}"))
                p.gone.append((item_key(it), "superseded", c.key))
                p.actions.append(Action("superseded", it, "contradicted by a newer item",
                                        e.line, entry_text, c.text))
                changed = True
                lines, entries, items = _add(lines, entries, items, iso, c)
                p.added.append(c)
                p.actions.append(Action("added", c.text, "; ".join(c.reasons) or "admitted",
                                        len(lines)))
                continue
        restated = _restatement(c, fc, scored)
        if restated is not None:
            e, it = restated
            p.confirmed.append((c, item_key(it)))
            p.actions.append(Action("confirmed", c.text, "restates line "
                                    f"{e.line}", e.line, it))
            continue
        lines, entries, items = _add(lines, entries, items, iso, c)
        p.added.append(c)
        p.actions.append(Action("added", c.text, "; ".join(c.reasons) or "admitted", len(lines)))
        changed = True

    changed |= _demote(p, entries, items, provenance, day, max_entries, ttl_days, active_days)
    if changed:
        p.lines = _rebuild(lines, entries, items)
    return p


def _by_subject(c: Candidate, scored: list[tuple[float, float, Entry, str]],
                provenance: Mapping[str, Mapping[str, Any]]
                ) -> tuple[list[tuple[Entry, str, str]], tuple[Entry, str, str] | None]:
    """The entries `c` makes out of date (the same subject given another value: "bun
    instead of pnpm" against "uses pnpm"), and else one it restates (the same subject,
    the same value). A setting's number ("minSdk 29") replaces another only when `c`
    says it changed; the user's own lines are never touched."""
    mine = subjects(c.text)
    if not mine and not c.subject:
        return [], None
    stale: list[tuple[Entry, str, str]] = []
    same: tuple[Entry, str, str] | None = None
    for sim, ov, e, it in scored:
        if item_key(it) not in provenance:
            continue
        theirs = subjects(it)
        named = provenance[item_key(it)].get("subject")
        # a subject only a model named: taken where the deterministic reading knows none
        # on either side (so a model that calls "answers in Chinese" a package manager
        # replaces nothing, and known subjects are decided by their values below)
        if (c.subject and named and _same_name(c.subject, named) and sim < 0.8
                and not mine and not theirs):
            stale.append((e, it, f"a newer statement about {c.subject}"))
            continue
        hit = next((n for n in mine for o in theirs if conflict(n, o)
                    and (n.name in KINDS or n.name.startswith("language") or c.change)), None)
        if hit is not None:
            stale.append((e, it, f"the {hit.name} is now {', '.join(sorted(hit.values))}"))
        elif same is None and any(agrees(n, o) and (ov >= SUPERSEDE_OVERLAP or _setting(n)
                                                     or c.change)
                                  for n in mine for o in theirs):
            s = next(n for n in mine for o in theirs if agrees(n, o))
            same = (e, it, f"restates line {e.line} ({s.describe()})")
    return stale, same


def _said_later(provenance: Mapping[str, Mapping[str, Any]], item: str, iso: str) -> bool:
    """`item` was first said on a day after `iso`, the day being consolidated: history
    consolidated after a later day was (a first start's backfill, after today's run)."""
    seen = (provenance.get(item_key(item)) or {}).get("first_seen")
    return bool(seen) and str(seen) > iso


def _older(p: Plan, c: Candidate, day: dt.date, e: Entry, it: str) -> None:
    """`c`, from an earlier day than line `e.line`'s `it` which it contradicts, is what
    `it` replaced: it goes to HISTORY.md as superseded by `it`, and MEMORY.md keeps `it`."""
    iso = day.isoformat()
    entry_text = format_entry(day, c.source, [c.text])
    p.history.append(history.superseded_line(iso, entry_text, it, f"MEMORY.md, {e.source}"))
    p.actions.append(Action("superseded", c.text, f"older than line {e.line}, said later",
                            e.line, entry_text, it))


def _setting(s: Subject) -> bool:
    """A named setting with its number ("Python version: 3.9"): agreeing on it is a
    restatement however else the two are worded."""
    return s.name.endswith(" version") and any(ch.isdigit() for v in s.values for ch in v)


def _same_name(a: str, b: str) -> bool:
    return " ".join(a.casefold().split()) == " ".join(b.casefold().split())


def _supersede_target(c: Candidate, scored: list[tuple[float, float, Entry, str]],
                      provenance: Mapping[str, Mapping[str, Any]]
                      ) -> tuple[Entry, str] | None:
    dc = distinctive(c.text)
    best: tuple[float, Entry, str] | None = None
    for _, ov, e, it in scored:
        if item_key(it) not in provenance:  # the user's own line: theirs to change
            continue
        shared = len(dc & distinctive(it))
        if ov < SUPERSEDE_OVERLAP and not shared:
            continue
        rank = ov + shared
        if best is None or rank > best[0]:
            best = (rank, e, it)
    return None if best is None else (best[1], best[2])


def _restatement(c: Candidate, fc: set[str], scored: list[tuple[float, float, Entry, str]]
                 ) -> tuple[Entry, str] | None:
    dc = distinctive(fc)
    for _, ov, e, it in sorted(scored, key=lambda x: -x[1]):
        di = distinctive(it)
        shared = dc & di
        if not c.repeat and _specific(dc - di) and _specific(di - dc):
            continue  # other numbers, versions or paths: another fact, not a restatement
        if not c.repeat and dc and di and not shared:
            continue  # names only other things: another fact
        if (ov >= RESTATE_OVERLAP or (len(shared) >= 2 and ov >= SUPERSEDE_OVERLAP)
                or (c.repeat and (ov >= 0.3 or shared))):
            return e, it
    return None


def _other_fact(a: str, b: str) -> bool:
    """Alike in words but each naming its own number, version or path: two facts."""
    da, db = distinctive(a), distinctive(b)
    return _specific(da - db) and _specific(db - da)


def _specific(tokens: set[str]) -> bool:
    return any(any(ch.isdigit() or ch == "/" for ch in t) for t in tokens)


def _add(lines: list[str], entries: list[Entry], items: dict[int, list[str]], iso: str,
         c: Candidate) -> tuple[list[str], list[Entry], dict[int, list[str]]]:
    text = format_entry(dt.date.fromisoformat(iso), c.source, [c.text])
    lines = [*lines, text]
    n = len(lines)
    entries = [*entries, Entry(n, iso, c.source, (c.text,), text)]
    items = {**items, n: [c.text]}
    return lines, entries, items


def _demote(p: Plan, entries: list[Entry], items: dict[int, list[str]],
            provenance: Mapping[str, Mapping[str, Any]], day: dt.date, max_entries: int,
            ttl_days: int, active_days: Sequence[str] | None = None) -> bool:
    """Demote memoryd-made entries past the TTL (low importance, not re-confirmed in the
    last `ttl_days` days of the history's own clock) and, over the cap, the least useful
    ones. Returns True when something moved."""
    iso = day.isoformat()
    fresh = {c.key: {"importance": c.importance, "confirmations": 0, "last_confirmed": iso}
             for c in p.added}

    def prov(e: Entry, ttl: bool = False) -> Mapping[str, Any] | None:
        its = items.get(e.line) or []
        if len(its) != 1:
            return None
        k = item_key(its[0])
        if k in fresh:
            return None if ttl else fresh[k]
        return provenance.get(k)

    moved = False
    live = [e for e in entries if items.get(e.line)]
    cutoff: str | None = None
    if ttl_days and active_days is None:
        cutoff = (day - dt.timedelta(days=ttl_days)).isoformat()
    elif ttl_days and active_days is not None:
        seen = [d for d in active_days if d <= iso]
        cutoff = seen[-ttl_days] if len(seen) >= ttl_days else None
    if cutoff is not None:
        for e in live:
            pr = prov(e, ttl=True)
            if pr and pr["importance"] < TTL_IMPORTANCE and pr["last_confirmed"] < cutoff:
                moved |= _move(p, e, items, iso, f"not confirmed since {pr['last_confirmed']}")
    live = [e for e in entries if items.get(e.line)]
    over = len(live) - max_entries
    if over > 0:
        ranked = sorted(((pr["importance"], pr["confirmations"], pr["last_confirmed"],
                          -len(e.text), e) for e in live if (pr := prov(e)) is not None),
                        key=lambda x: x[:4])
        for *_, e in ranked[:over]:
            moved |= _move(p, e, items, iso, f"over the {max_entries}-entry cap")
    return moved


def _move(p: Plan, e: Entry, items: dict[int, list[str]], iso: str, why: str) -> bool:
    (it,) = items[e.line]
    items[e.line] = []
    p.history.append(history.demoted_line(iso, e.text, why))
    p.gone.append((item_key(it), "demoted", None))
    p.actions.append(Action("demoted", it, why, e.line, e.text))
    return True


def _rebuild(lines: list[str], entries: list[Entry], items: dict[int, list[str]]) -> list[str]:
    by_line = {e.line: e for e in entries}
    out = []
    for n, text in enumerate(lines, 1):
        e = by_line.get(n)
        if e is None:
            out.append(text)
            continue
        its = items.get(n) or []
        if not its:
            continue
        if tuple(its) == e.items:
            out.append(text)
        else:
            out.append(format_entry(dt.date.fromisoformat(e.date), e.source, its))
    return out
