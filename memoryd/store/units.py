"""Units and their full-text index.

`store_record` is where the adapters' merge semantics become rows: a replayed record
id is a no-op, an `append` piece is added once per part id, a `replace` upsert
rewrites the unit. The FTS row (rowid = unit id) follows every change.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memoryd.ingest.adapters.base import Record
from memoryd.store.fts import index_text
from memoryd.tokens import estimate_tokens


@dataclass(frozen=True, slots=True)
class Stored:
    unit_id: int
    new: bool


class SessionWriter:
    """Stores units into one session inside the current transaction. The session's
    counters (next seq, turns, unit counts, time span) are kept here and written once by
    `flush()`, and a new unit costs two INSERTs: backfills write thousands per batch.
    No RETURNING either: a RETURNING statement between FTS5 inserts makes FTS5 flush its
    pending terms to disk each time, doubling the cost of a unit."""

    def __init__(self, conn: sqlite3.Connection, pk: int) -> None:
        self.conn, self.pk = conn, pk
        row = conn.execute("SELECT next_seq, turns, units, user_units, first_ts, last_ts, "
                           "title FROM sessions WHERE id = ?", (pk,)).fetchone()
        self.next_seq, self.turns, self.units, self.user_units = row[0], row[1], row[2], row[3]
        self.first_ts, self.last_ts = row[4], row[5]
        self.title: str | None = None  # a fallback title, when the session has none
        self.has_title = row[6] is not None
        self.dirty = False

    def store(self, rec: Record, record_id: str, file_id: int | None,
              offset: int | None) -> Stored | None:
        """Insert or merge one record. Returns None when nothing changed."""
        user_turn = int(rec.role == "user" and rec.kind == "message")
        cur = self.conn.execute(
            "INSERT INTO units (session_pk, record_id, seq, turn, role, kind, content, "
            "tool_name, tool_args, related_id, ts, file_id, offset, parts, chars, tokens) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (session_pk, record_id) DO NOTHING",
            (self.pk, record_id, self.next_seq, self.turns + user_turn, rec.role, rec.kind,
             rec.content, rec.tool_name, rec.tool_args, rec.related_id, rec.ts, file_id,
             offset, rec.part_id, len(rec.content), estimate_tokens(rec.content)))
        if cur.rowcount != 1:
            return _merge(self.conn, self.pk, rec, record_id)
        uid = cur.lastrowid
        assert uid is not None
        self.conn.execute("INSERT INTO units_fts (rowid, body, one_liner) VALUES (?, ?, '')",
                          (uid, index_text(rec.content)))
        self.next_seq += 1
        self.turns += user_turn
        self.units += 1
        self.user_units += user_turn
        if user_turn and not self.has_title:
            self.title, self.has_title = fallback_title(rec.content), True
        if rec.ts is not None:
            self.first_ts = rec.ts if self.first_ts is None else min(self.first_ts, rec.ts)
            self.last_ts = rec.ts if self.last_ts is None else max(self.last_ts, rec.ts)
        self.dirty = True
        return Stored(uid, True)

    def flush(self) -> None:
        if self.dirty:
            self.conn.execute(
                "UPDATE sessions SET next_seq = ?, turns = ?, units = ?, user_units = ?, "
                "first_ts = ?, last_ts = ?, title = coalesce(title, ?) WHERE id = ?",
                (self.next_seq, self.turns, self.units, self.user_units, self.first_ts,
                 self.last_ts, self.title, self.pk))
            self.dirty = False


def fallback_title(text: str, limit: int = 80) -> str:
    """A session's first user message, first non-empty line, as its title."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def store_record(conn: sqlite3.Connection, pk: int, rec: Record, record_id: str,
                 file_id: int | None, offset: int | None) -> Stored | None:
    """Insert or merge one record into session `pk` (see SessionWriter for many)."""
    w = SessionWriter(conn, pk)
    stored = w.store(rec, record_id, file_id, offset)
    w.flush()
    return stored


def _merge(conn: sqlite3.Connection, pk: int, rec: Record, record_id: str) -> Stored | None:
    """The record id is already stored: a replay is a no-op, an `append` piece is added
    once per part id, a `replace` upsert rewrites the unit."""
    row = conn.execute(
        "SELECT id, content, parts FROM units WHERE session_pk = ? AND record_id = ?",
        (pk, record_id),
    ).fetchone()
    uid, content, parts = row["id"], row["content"], row["parts"]
    if rec.merge == "append":
        have = set((parts or "").split("\n"))
        if not rec.part_id or rec.part_id in have:
            return None
        content = content + "\n\n" + rec.content if content else rec.content
        parts = (parts + "\n" if parts else "") + rec.part_id
    elif rec.merge == "replace":
        if rec.content == content:
            return None
        content = rec.content
    else:
        return None
    conn.execute(
        "UPDATE units SET content = ?, parts = ?, chars = ?, tokens = ?, "
        "tool_name = coalesce(?, tool_name), tool_args = coalesce(?, tool_args) WHERE id = ?",
        (content, parts, len(content), estimate_tokens(content), rec.tool_name, rec.tool_args,
         uid),
    )
    conn.execute("UPDATE units_fts SET body = ? WHERE rowid = ?", (index_text(content), uid))
    return Stored(uid, False)


def count_units(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM units").fetchone()[0]


SEARCH_COLUMNS = (
    "u.id AS unit_id, u.record_id, s.agent, s.session_id, s.project, u.role, u.kind, u.ts, "
    "u.seq, u.turn, u.content, u.one_liner, u.tool_name, f.path, u.offset"
)
# what ranking needs of a candidate: no content beyond a head for spotting duplicates
CANDIDATE_COLUMNS = (
    "u.id AS unit_id, u.session_pk, u.seq, u.role, u.kind, u.ts, u.chars, s.project"
)
# Filters need a unit's session and seq per full-text match: read them from the narrow
# index (m003), not the wide row; the planner does not pick it by itself without ANALYZE.
_FROM_MATCH = ("FROM units_fts JOIN units u INDEXED BY units_id_session "
               "ON u.id = units_fts.rowid JOIN sessions s ON s.id = u.session_pk ")

Exclusion = tuple[int, int]
"""(session_pk, from_seq): leave out that session's units with seq >= from_seq."""


def _where(match: str, agent: str | None, project: str | None, session_id: str | None,
           exclude: list[Exclusion] | None = None,
           project_within: str | None = None) -> tuple[str, list[Any]]:
    clauses, args = ["units_fts MATCH ?"], [match]
    for col, val in (("s.agent", agent), ("s.project", project), ("s.session_id", session_id)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    if project_within is not None:  # the project is this directory or below it
        root = project_within.rstrip("/")
        escaped = root.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        clauses.append("(s.project = ? OR s.project LIKE ? ESCAPE '\\')")
        args += [root, escaped + "/%"]
    for pk, from_seq in exclude or ():
        clauses.append("NOT (u.session_pk = ? AND u.seq >= ?)")
        args += [pk, from_seq]
    return " AND ".join(clauses), args


def _filtered(agent: str | None, project: str | None, session_id: str | None,
              exclude: list[Exclusion] | None, project_within: str | None = None) -> bool:
    return (any(v is not None for v in (agent, project, session_id, project_within))
            or bool(exclude))


def count_matches(conn: sqlite3.Connection, match: str, *, agent: str | None = None,
                  project: str | None = None, session_id: str | None = None,
                  exclude: list[Exclusion] | None = None,
                  project_within: str | None = None) -> int:
    if not _filtered(agent, project, session_id, exclude, project_within):
        # FTS5 alone: no row lookups
        return int(conn.execute("SELECT count(*) FROM units_fts WHERE units_fts MATCH ?",
                                (match,)).fetchone()[0])
    where, args = _where(match, agent, project, session_id, exclude, project_within)
    return int(conn.execute(f"SELECT count(*) {_FROM_MATCH} WHERE {where}", args).fetchone()[0])


def search_units(conn: sqlite3.Connection, match: str, *, limit: int,
                 agent: str | None = None, project: str | None = None,
                 session_id: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """BM25 over content and one-liners (one-liners weigh more). Returns (total, rows).
    The plain FTS ranking; `memoryd.retrieval` reranks on top of `match_candidates`."""
    total = count_matches(conn, match, agent=agent, project=project, session_id=session_id)
    if not total:
        return 0, []
    where, args = _where(match, agent, project, session_id)
    rows = conn.execute(
        f"SELECT {SEARCH_COLUMNS}, -bm25(units_fts, 1.0, 3.0) AS score {_FROM_MATCH}"
        f"LEFT JOIN files f ON f.id = u.file_id WHERE {where} ORDER BY score DESC LIMIT ?",
        (*args, limit),
    ).fetchall()
    return total, [dict(r) for r in rows]


def match_candidates(conn: sqlite3.Connection, match: str, *, limit: int,
                     agent: str | None = None, project: str | None = None,
                     session_id: str | None = None, exclude: list[Exclusion] | None = None,
                     w_body: float = 1.0, w_one_liner: float = 3.0,
                     head_chars: int = 400,
                     project_within: str | None = None) -> list[dict[str, Any]]:
    """The `limit` best units by BM25 (column weights body, one-liner), best first, with
    what reranking needs: position in the session, role, kind, time, project, and the
    first `head_chars` characters (`head`, for spotting duplicates).

    Two steps, so only the `limit` winners are read from `units`: rank in FTS5 (joined to
    units and sessions only when a filter needs them), then fetch the winners' rows."""
    if _filtered(agent, project, session_id, exclude, project_within):
        where, args = _where(match, agent, project, session_id, exclude, project_within)
        ranked = f"{_FROM_MATCH}WHERE {where}"
    else:
        ranked, args = "FROM units_fts WHERE units_fts MATCH ?", [match]
    rows = conn.execute(
        f"WITH top AS (SELECT units_fts.rowid AS id, -bm25(units_fts, ?, ?) AS bm25 {ranked} "
        f"ORDER BY bm25 DESC LIMIT ?) "
        f"SELECT {CANDIDATE_COLUMNS}, substr(u.content, 1, ?) AS head, top.bm25 FROM top "
        f"JOIN units u ON u.id = top.id JOIN sessions s ON s.id = u.session_pk "
        f"ORDER BY top.bm25 DESC",
        (w_body, w_one_liner, *args, limit, head_chars),
    ).fetchall()
    return [dict(r) for r in rows]


def _ids_json(ids: Iterable[int]) -> str:
    return json.dumps(list(ids))


def units_by_id(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Full search rows (content, session, file) of the given units."""
    rows = conn.execute(
        f"SELECT {SEARCH_COLUMNS} FROM units u JOIN sessions s ON s.id = u.session_pk "
        "LEFT JOIN files f ON f.id = u.file_id "
        "WHERE u.id IN (SELECT value FROM json_each(?))", (_ids_json(ids),)).fetchall()
    return {r["unit_id"]: dict(r) for r in rows}


def matched_terms(conn: sqlite3.Connection, term_exprs: list[str], ids: list[int]
                  ) -> dict[int, set[int]]:
    """Which of `term_exprs` (by index) each of the given units matches. Cheap: without
    bm25() FTS5 only seeks these rowids in each term's doclist."""
    matched: dict[int, set[int]] = {}
    if not ids:
        return matched
    ids_json = _ids_json(ids)
    for i, expr in enumerate(term_exprs):
        for (rowid,) in conn.execute(
                "SELECT rowid FROM units_fts WHERE units_fts MATCH ? "
                "AND rowid IN (SELECT value FROM json_each(?))", (expr, ids_json)):
            matched.setdefault(rowid, set()).add(i)
    return matched


def column_scores(conn: sqlite3.Connection, match: str, ids: list[int], *,
                  w_body: float = 1.0, w_one_liner: float = 3.0
                  ) -> dict[int, tuple[float, float]]:
    """BM25 of the body alone and of the one-liner alone for those of the given units
    whose one-liner matches (for the others the body score is the whole score). Only
    then does it pay bm25()'s pass over every match for the term statistics."""
    if not ids:
        return {}
    ids_json = _ids_json(ids)
    in_ids = "rowid IN (SELECT value FROM json_each(?))"
    hit = [r[0] for r in conn.execute(
        f"SELECT rowid FROM units_fts WHERE units_fts MATCH ? AND {in_ids}",
        (f"{{one_liner}} : ({match})", ids_json))]
    if not hit:
        return {}
    return {r[0]: (r[1], r[2]) for r in conn.execute(
        f"SELECT rowid, -bm25(units_fts, ?, 0.0), -bm25(units_fts, 0.0, ?) FROM units_fts "
        f"WHERE units_fts MATCH ? AND {in_ids}", (w_body, w_one_liner, match, _ids_json(hit)))}


def session_units_around(conn: sqlite3.Connection, spots: Iterable[tuple[int, int]],
                         radius: int) -> list[dict[str, Any]]:
    """Units within `radius` seq of each (session_pk, seq) spot, spots themselves included."""
    spans = [(pk, seq - radius, seq + radius) for pk, seq in spots]
    if not spans:
        return []
    rows = conn.execute(
        "SELECT u.id AS unit_id, u.session_pk, u.record_id, u.seq, u.turn, u.role, u.kind, "
        "u.ts, u.content, u.one_liner, u.tool_name FROM json_each(?) j "
        "JOIN units u ON u.session_pk = json_extract(j.value, '$[0]') "
        "AND u.seq BETWEEN json_extract(j.value, '$[1]') AND json_extract(j.value, '$[2]') "
        "ORDER BY u.session_pk, u.seq", (json.dumps(spans),)).fetchall()
    seen: set[int] = set()
    out = []
    for r in rows:
        if r["unit_id"] not in seen:
            seen.add(r["unit_id"])
            out.append(dict(r))
    return out


def session_tails(conn: sqlite3.Connection, session_id: str, recent: int
                  ) -> list[Exclusion]:
    """For each session with this id (any agent): exclude its last `recent` units."""
    return [(r[0], r[1] - recent) for r in conn.execute(
        "SELECT id, next_seq FROM sessions WHERE session_id = ?", (session_id,))]
