"""Ranked recall over units: what /v1/search and /v1/context call.

A free-text query (keywords or a natural question) becomes an OR of its content words:
stop words are dropped unless the query has nothing else, English is stemmed (in the
index's analyzer), CJK words become phrases of bigrams, camelCase words are also
indexed as their parts, a lone digit or one-letter word weighs little
(`memoryd.index.text`, `memoryd.index.query`). The tantivy index ranks the matches with
BM25 over each unit's body and one-liner (the one-liner weighted up), filters applied
inside it; the best `candidates` of them are then re-scored here:

- **speaker**: a first-person question about oneself ("where did I buy my bookshelf?")
  is about what the *user* said, so user messages weigh more; a question about what the
  assistant said ("you suggested ...", "you told me ...") favours assistant messages. A
  question with neither cue, or about a shared conversation ("we discussed", "remind
  me"), is neutral. Why this is principled for agent memory: the user is the source of
  the facts, preferences and decisions about themselves; assistant replies are long, echo
  the user's words back and match almost any query on the same topic, so without this
  they crowd out the one short user line that holds the answer.
- **neighbour**: a unit's adjacent units in its session (the question before an answer,
  the reply after a request) add a small share of their score: an exchange is one topic.
- **recency** (mild, decays with a half-life) and **same project** (when the caller says
  which project it is in but searches globally).
- **de-duplication**: near-identical units (the same normalized text, e.g. a prompt
  pasted into several sessions) collapse into the best one, which lists their ids.
- **session diversity**: each further hit from a session already in the results is
  scaled down a little, so one long session does not fill every slot.
- **vector** (with the `memoryd[embed]` extra): the ranking joined with the units nearest
  the query by meaning, by reciprocal-rank fusion of the two lists (`memoryd.recall.union`):
  a unit the keywords never found can be a hit.

Every hit says why it matched: the query terms it contains and the signals that fired.
"""

from __future__ import annotations

import heapq
import math
import re
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from memoryd.index.protocol import Index
from memoryd.index.query import Filters
from memoryd.index.query import term_tokens
from memoryd.index.schema import SPEAKER_CODES
from memoryd.index.text import content_terms, query_terms, split_cjk
from memoryd.recall.rows import candidates
from memoryd.recall.union import asked, fuse, vector_list
from memoryd.store import Store
from memoryd.store.units import (
    CHUNK,
    SEARCH_COLUMNS,
    Exclusion,
    session_tails,
    units_by_id,
)

Speaker = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Params:
    """Ranking knobs. Defaults were set on the retrieval benchmark's dev split
    (bench/eval_ranker.py) and kept only where they are generic."""

    candidates: int = 30          # index matches re-scored, at least ...
    candidates_per_hit: int = 2   # ... this many per requested hit,
    max_candidates: int = 3000    # ... and at most this many
    w_body: float = 1.0           # BM25 column weights
    w_one_liner: float = 3.0
    speaker: float = 3.0          # factor for messages of the speaker the query asks about
    neighbour: float = 0.3        # share of the best adjacent unit's score added
    session_repeat: float = 0.85  # factor per earlier hit from the same session
    recency: float = 0.1          # bonus (fraction of the score) for a unit from just now
    recency_half_life_days: float = 14.0
    same_project: float = 0.25    # bonus (fraction) for units of `prefer_project`
    dedupe: bool = True
    union_depth: int = 30         # each list's length in the union with the vectors' (at
    # least the hits asked for; `memoryd.recall.union`)
    rrf_k: float = 60.0           # reciprocal-rank fusion's constant
    w_vector: float = 1.0         # the vector rank's weight (the lexical rank's: 1),
    # chosen leaving each set out on 297 probes (bench/eval_embed_paraphrase.py): 1 in
    # every fold. rrf_k and union_depth were fixed beforehand (lists of 10 or 50 do alike)


PARAMS = Params()


@dataclass(slots=True)
class QueryPlan:
    terms: list[str]              # searched terms, in query order
    dropped: list[str]            # stop words left out
    match: str | None             # the terms as searched, "a OR b" (None: nothing to search)
    speaker: Speaker | None       # whose messages the query asks about


@dataclass(slots=True)
class Hit:
    unit_id: int
    record_id: str
    agent: str
    session_id: str
    project: str | None
    role: str
    kind: str
    ts: float | None
    seq: int
    turn: int
    content: str
    one_liner: str | None
    tool_name: str | None
    path: str | None
    offset: int | None
    score: float
    matched: list[str] = field(default_factory=list)
    signals: dict[str, float] = field(default_factory=dict)
    duplicates: list[int] = field(default_factory=list)  # ids of near-identical units
    # collapsed into this one
    context: list[dict[str, Any]] = field(default_factory=list)  # adjacent units

    def why(self) -> dict[str, Any]:
        out: dict[str, Any] = {"matched": self.matched, "signals": self.signals}
        if self.duplicates:
            out["duplicates"] = self.duplicates
        return out


@dataclass(slots=True)
class Retrieval:
    plan: QueryPlan
    total: int                    # index matches under the filters (or candidates seen)
    hits: list[Hit]
    estimated: bool = False       # total estimated (a big unfiltered OR search)
    vectors: int | None = None    # the vector list's length (None: no vectors asked)


# -- query analysis -------------------------------------------------------------------

# "you told me", "you've suggested", "you had mentioned": the assistant's past words.
_ASKS_ASSISTANT = re.compile(
    r"\byou(?:'ve|’ve| have| had)?\s+(?:\w+\s+){0,2}?"
    r"(?:told|said|suggested|mentioned|recommended|gave|listed|provided|explained|shared|"
    r"described|showed|shown|wrote|written|offered|proposed|named|advised)\b", re.I)
# "remind me", "we discussed", "our last conversation": the conversation itself.
_ASKS_SHARED = re.compile(
    r"\bremind me\b|\bwe\s+(?:\w+\s+)?(?:talked|discussed|chatted|spoke|decided|agreed)\b|"
    r"\bour\s+(?:\w+\s+)?(?:chat|conversation|discussion)\b", re.I)
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b|\bi['’](?:m|ve|d|ll)\b", re.I)


def query_speaker(query: str) -> Speaker | None:
    """Whose messages a question asks about, from its wording; None when unclear."""
    if _ASKS_ASSISTANT.search(query):
        return "assistant"
    if _ASKS_SHARED.search(query):
        return None
    if _FIRST_PERSON.search(query):
        return "user"
    return None


def plan_query(query: str, mode: str = "or") -> QueryPlan:
    """Terms to search (stop words dropped; in OR mode a long CJK run becomes its
    bigrams), the expression as searched, and whose words the query asks about."""
    terms = query_terms(query)
    kept = content_terms(terms)
    dropped = [t for t in terms if t not in kept]
    if mode == "or":
        kept = split_cjk(kept)
    match = (" AND " if mode == "and" else " OR ").join(kept) if kept else None
    return QueryPlan(kept, dropped, match, query_speaker(query))


# -- ranking --------------------------------------------------------------------------

def _score(cands: list[dict[str, Any]], plan: QueryPlan, now: float,
           prefer_project: str | None, p: Params) -> None:
    """Set c["score"] and c["signals"] on every candidate."""
    at = {(c["session_pk"], c["seq"]): c["bm25"] for c in cands}
    for c in cands:
        sig: dict[str, float] = {}
        score = c["bm25"]
        if p.neighbour:
            nb = max(at.get((c["session_pk"], c["seq"] - 1), 0.0),
                     at.get((c["session_pk"], c["seq"] + 1), 0.0))
            if nb > 0:
                sig["neighbour"] = round(p.neighbour * nb, 4)
                score += p.neighbour * nb
        if plan.speaker and c["speaker"] == SPEAKER_CODES[plan.speaker]:
            sig["speaker"] = p.speaker
            score *= p.speaker
        if p.recency and c["ts"] is not None:
            age_days = max(0.0, now - c["ts"]) / 86400.0
            bonus = p.recency * math.pow(0.5, age_days / p.recency_half_life_days)
            if bonus >= 0.001:
                sig["recency"] = round(1.0 + bonus, 4)
                score *= 1.0 + bonus
        if prefer_project and p.same_project and _within(c["project"], prefer_project):
            sig["same_project"] = 1.0 + p.same_project
            score *= 1.0 + p.same_project
        c["score"] = score
        c["signals"] = sig


def _within(project: str | None, root: str) -> bool:
    """A session's project (its cwd) lies in `root` (a git root): same project."""
    return bool(project) and (project == root or project.startswith(root.rstrip("/") + "/"))


def _dedupe(cands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Collapse near-identical units (same normalized head, `dup`, and length within 5%)
    into the best-scored one; `dups` lists the ids folded into it."""
    kept: dict[int, list[dict[str, Any]]] = {}
    out = []
    for c in sorted(cands, key=lambda c: -c["score"]):
        key = c["dup"]
        if not key:
            out.append(c)
            continue
        group = kept.setdefault(key, [])
        twin = next((g for g in group
                     if abs(g["chars"] - c["chars"]) <= 0.05 * max(g["chars"], c["chars"])),
                    None)
        if twin is not None:
            twin.setdefault("dups", []).append(c["unit_id"])
            continue
        group.append(c)
        out.append(c)
    return out


def _diverse_top(cands: list[dict[str, Any]], k: int, factor: float) -> list[dict[str, Any]]:
    """The k best by score, each further hit of a session scaled by `factor` per earlier
    hit of that session (lazy greedy: scores only go down, so a heap suffices)."""
    if factor >= 1.0:
        return sorted(cands, key=lambda c: -c["score"])[:k]
    heap = [(-c["score"], i, 0) for i, c in enumerate(cands)]
    heapq.heapify(heap)
    taken: dict[int, int] = {}
    out: list[dict[str, Any]] = []
    while heap and len(out) < k:
        neg, i, seen = heapq.heappop(heap)
        c = cands[i]
        now_seen = taken.get(c["session_pk"], 0)
        if now_seen != seen:  # stale: its session got another hit since
            heapq.heappush(heap, (-c["score"] * factor ** now_seen, i, now_seen))
            continue
        if seen:
            c["signals"]["session_repeat"] = round(factor ** seen, 4)
            c["score"] = -neg
        taken[c["session_pk"]] = now_seen + 1
        out.append(c)
    return out


def retrieve_sync(conn: sqlite3.Connection, index: Index, query: str, *, k: int,
                  mode: str = "or", agent: str | None = None, project: str | None = None,
                  session_id: str | None = None, prefer_project: str | None = None,
                  exclude_session_recent: tuple[str, int] | None = None,
                  now: float | None = None, neighbours: int = 0, count: bool = False,
                  project_within: str | None = None, since: float | None = None,
                  until: float | None = None, params: Params = PARAMS,
                  vq: Any = None) -> Retrieval:
    """Rank units for `query`; see the module docstring. Filters (agent, project,
    session_id, since/until on the unit's time) are exact; `project_within` keeps
    sessions whose project is that directory or below it (a git root).
    `exclude_session_recent=(session_id, n)` leaves out that session's last n units
    (already in the asking agent's context). `neighbours=n` attaches the n units before
    and after each hit as `context`. `count=True` counts every match for `total`.
    `vq`: the units nearest the query by meaning (`memoryd.embed.VectorQuery`), joined
    with the lexical ranking (`memoryd.recall.union`); None: lexical only."""
    p = params
    plan = plan_query(query, mode)
    if plan.match is None or k <= 0:
        return Retrieval(plan, 0, [])
    now = time.time() if now is None else now
    exclude: list[Exclusion] = []
    if exclude_session_recent is not None:
        sid, recent = exclude_session_recent
        exclude = session_tails(conn, sid, max(0, recent))
    f = Filters(agent=agent, project=project, session_id=session_id,
                project_within=project_within, since=since, until=until, exclude=exclude)
    depth = max(p.union_depth, k)
    if vq is not None:  # the model's process embeds and searches while the words rank
        vq.ask(conn, asked(f, depth))
    limit = min(p.max_candidates, max(p.candidates, p.candidates_per_hit * k))
    got = index.ranked(conn, plan.terms, f, mode=mode, limit=limit, count=count,
                       w_body=p.w_body, w_one_liner=p.w_one_liner,
                       speaker=plan.speaker is not None)  # `_score` looks only then
    fast = got is not None
    estimated = got is not None and got[2]
    total, cands = (got[0], got[1]) if got is not None else \
        _scanned(conn, index, plan, f, mode, limit, p)
    vec = vector_list(conn, vq, f, depth) if vq is not None else None
    if not cands and not vec:
        return Retrieval(plan, 0, [], vectors=None if vec is None else 0)
    if fast and prefer_project and project_within and _within(project_within, prefer_project):
        for c in cands:  # the filter kept only sessions there: no lookup
            c["project"] = project_within
    elif fast and prefer_project:  # the index holds the session, the database its project
        projects = session_projects(conn, {c["session_pk"] for c in cands})
        for c in cands:
            c["project"] = projects.get(c["session_pk"])
    _score(cands, plan, now, prefer_project, p)
    for c in cands:
        c["base"] = c["score"]
    # Units deleted from the database but not yet from the index (forget, purge,
    # archival while their deletes wait) are found missing when the hits' rows are read,
    # and ranking runs again without them: no existence check of every candidate before
    # ranking, so a search reads the database once (one round trip in fleet mode).
    for _ in range(REFILLS):
        if not vec:  # no vector list, or none of it passed the filters: lexical
            top = _ranked_top(cands, k, p)
        else:
            known = {c["unit_id"]: c for c in cands}
            fused = fuse(_ranked_top(cands, depth, p), vec, known, rrf_k=p.rrf_k,
                         w_vector=p.w_vector)
            top = (_dedupe(fused) if p.dedupe else fused)[:k]
        rows, near = _rows(conn, top, neighbours)
        gone = {c["unit_id"] for c in top} - rows.keys()
        if not gone:
            break
        cands = [c for c in cands if c["unit_id"] not in gone]
        vec = vec and [v for v in vec if v["unit_id"] not in gone]
        total = max(0, total - len(gone))
    hits = _hits(index, top, rows, near, plan, neighbours, p, fast, mode)
    total = max(total, len(cands))
    if vec:  # the units only the vectors found count as matches too
        total += len({v["unit_id"] for v in vec} - {c["unit_id"] for c in cands})
    return Retrieval(plan, total, hits, estimated, None if vec is None else len(vec))


REFILLS = 3
"""Rankings tried while hits turn out deleted; after that, fewer hits are shown."""


def _ranked_top(cands: list[dict[str, Any]], k: int, p: Params) -> list[dict[str, Any]]:
    """Duplicates collapsed, then the k best with session diversity, from the scores
    `_score` set (kept in "base": both steps may be run again on fewer candidates)."""
    for c in cands:
        c["score"] = c["base"]
        c.pop("dups", None)
        c["signals"].pop("session_repeat", None)
    return _diverse_top(_dedupe(cands) if p.dedupe else cands, k, p.session_repeat)


def _scanned(conn: sqlite3.Connection, index: Index, plan: QueryPlan, f: Filters,
             mode: str, limit: int, p: Params) -> tuple[int, list[dict[str, Any]]]:
    """The candidates while the index is rebuilt: its fallback scan, the rows read from
    SQLite (what the index's fast fields hold otherwise)."""
    total, found = index.candidates(conn, plan.terms, f, mode=mode, limit=limit,
                                    count=False, w_body=p.w_body, w_one_liner=p.w_one_liner)
    rows = candidates(conn, [u for u, _ in found])
    cands = []
    for uid, score in found:
        if (r := rows.get(uid)) is not None:
            r["bm25"] = score
            cands.append(r)
    return total, cands


def session_projects(conn: sqlite3.Connection, pks: set[int]) -> dict[int, str | None]:
    """The project of each of these sessions (one statement per `CHUNK` sessions)."""
    out: dict[int, str | None] = {}
    ids = sorted(pks)
    for i in range(0, len(ids), CHUNK):
        part = ids[i:i + CHUNK]
        out.update(conn.execute("SELECT id, project FROM sessions WHERE id IN ("
                                + ",".join("?" * len(part)) + ")", part).fetchall())
    return out


_AROUND_KEYS = ("unit_id", "session_pk", "record_id", "seq", "turn", "role", "kind", "ts",
                "content", "one_liner", "tool_name")


def _rows_and_around(conn: sqlite3.Connection, top: list[dict[str, Any]], radius: int
                     ) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """The hits' full rows and the units within `radius` seq of each hit, from one
    statement per `CHUNK // 3` hits (each hit lies in its own span): what `units_by_id`
    and `session_units_around` answer in two round trips in fleet mode."""
    want = {c["unit_id"] for c in top}
    rows: dict[int, dict[str, Any]] = {}
    found: list[dict[str, Any]] = []
    for i in range(0, len(top), CHUNK // 3):
        part = top[i:i + CHUNK // 3]
        found += [dict(r) for r in conn.execute(
            "WITH spans (pk, lo, hi) AS (VALUES " + ", ".join(["(?, ?, ?)"] * len(part)) + ") "
            f"SELECT {SEARCH_COLUMNS}, u.session_pk FROM spans j "
            "JOIN units u ON u.session_pk = j.pk AND u.seq BETWEEN j.lo AND j.hi "
            "JOIN sessions s ON s.id = u.session_pk LEFT JOIN files f ON f.id = u.file_id",
            [v for c in part for v in (c["session_pk"], c["seq"] - radius,
                                       c["seq"] + radius)]).fetchall()]
    found.sort(key=lambda r: (r["session_pk"], r["seq"]))
    seen: set[int] = set()
    near = []
    for r in found:
        if r["unit_id"] in seen:
            continue
        seen.add(r["unit_id"])
        near.append({k: r[k] for k in _AROUND_KEYS})
        if r["unit_id"] in want:
            rows[r["unit_id"]] = {k: v for k, v in r.items() if k != "session_pk"}
    if missing := [i for i in want if i not in rows]:  # the index's place is out of date
        rows.update(units_by_id(conn, missing))
    return rows, near


def _rows(conn: sqlite3.Connection, top: list[dict[str, Any]], neighbours: int
          ) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """The hits' rows (those the database still holds) and, with `neighbours`, the units
    around them: one read."""
    if neighbours > 0:
        return _rows_and_around(conn, top, neighbours)
    return units_by_id(conn, [c["unit_id"] for c in top]), []


def _hits(index: Index, top: list[dict[str, Any]], rows: dict[int, dict[str, Any]],
          near: list[dict[str, Any]], plan: QueryPlan, neighbours: int, p: Params,
          fast: bool, mode: str = "or") -> list[Hit]:
    # the terms each hit matched, and its score by field: of the hits the words found
    # (one only the vectors found matched none)
    ids = [c["unit_id"] for c in top if c["unit_id"] in rows and c.get("lexical", True)]
    around: dict[int, list[dict[str, Any]]] = {}
    for u in near:
        around.setdefault(u.pop("session_pk"), []).append(u)
    every = _matched_by_all(index, plan, mode) if fast else None
    at = {c["unit_id"]: c["at"] for c in top if "at" in c}  # where the index found them
    held = None  # the terms each hit's one-liner holds, when the index said
    if every is not None:  # the query alone says it: no search
        matched = dict.fromkeys(ids, every)
    elif fast:  # the index says which terms each hit matched
        matched, held = index.matched_fields(plan.terms, ids, at)
    else:
        matched = index.matched(plan.terms, {
            i: r["content"] + "\n" + (r["one_liner"] or "") for i, r in rows.items()})
    # split the score by field only for hits with a one-liner
    lines = {i: r["one_liner"] for i in ids if (r := rows.get(i)) and r["one_liner"]}
    cols = index.split_scores(plan.terms, lines, {c["unit_id"]: c["bm25"] for c in top},
                              w_body=p.w_body, w_one_liner=p.w_one_liner, at=at,
                              held=held)
    hits = []
    for c in top:
        r = rows.get(c["unit_id"])
        if r is None:  # forgotten, and not yet out of the index
            continue
        body, one = cols.get(c["unit_id"], (c["bm25"], 0.0))
        signals = {"bm25_content": round(body, 4)} if c.get("lexical", True) else {}
        if one > 0:
            signals["bm25_one_liner"] = round(one, 4)
        signals.update(c["signals"])
        ctx = [u for u in around.get(c["session_pk"], [])
               if u["unit_id"] != c["unit_id"] and abs(u["seq"] - c["seq"]) <= neighbours]
        hits.append(Hit(
            unit_id=r["unit_id"], record_id=r["record_id"], agent=r["agent"],
            session_id=r["session_id"], project=r["project"], role=r["role"], kind=r["kind"],
            ts=r["ts"], seq=r["seq"], turn=r["turn"], content=r["content"],
            one_liner=r["one_liner"], tool_name=r["tool_name"], path=r["path"],
            offset=r["offset"], score=c["score"],
            matched=[plan.terms[i] for i in sorted(matched.get(c["unit_id"], ()))],
            signals=signals, duplicates=c.get("dups", []), context=ctx))
    return hits


def _matched_by_all(index: Index, plan: QueryPlan, mode: str) -> set[int] | None:
    """The terms (by index) every hit of the index's ranking matched, when the query alone
    says so: an AND query's hits match each of its searchable terms, a one-term query's
    hits that term; None otherwise (asked of the index per hit: `matched_ids`)."""
    if mode != "and" and len(plan.terms) != 1:
        return None
    return {i for i, t in enumerate(plan.terms) if term_tokens(index.analyzer, t)}


async def retrieve(store: Store, query: str, *, k: int, mode: str = "or",
                   agent: str | None = None, project: str | None = None,
                   session_id: str | None = None, prefer_project: str | None = None,
                   exclude_session_recent: tuple[str, int] | None = None,
                   now: float | None = None, neighbours: int = 0,
                   params: Params = PARAMS, vq: Any = None) -> list[Hit]:
    """`retrieve_sync` on the store's reader thread; the hits, best first."""
    r = await store.read(lambda c: retrieve_sync(
        c, store.index, query, k=k, mode=mode, agent=agent, project=project, session_id=session_id,
        prefer_project=prefer_project, exclude_session_recent=exclude_session_recent,
        now=now, neighbours=neighbours, params=params, vq=vq))
    return r.hits
