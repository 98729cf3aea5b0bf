"""The slow path while the index is rebuilt: a scan of the most recent units in SQLite.

Search keeps answering during a rebuild (`index: rebuilding` in status and in the search
message), from the newest `WINDOW` units only, scored by how many query terms each
contains (stem-blind: a term matches as a prefix of a word, as in `snippet`).
"""

from __future__ import annotations

import sqlite3

from memoryd.index.query import Filters
from memoryd.index.text import is_cjk

WINDOW = 50_000


def probe(term: str) -> str:
    return term if is_cjk(term) else term[: max(3, len(term) - 2)]


def session_where(f: Filters) -> tuple[list[str], list[object]]:
    """SQL clauses on `sessions s` for the session-level filters."""
    clauses: list[str] = []
    args: list[object] = []
    for col, val in (("s.agent", f.agent), ("s.project", f.project),
                     ("s.session_id", f.session_id)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    if f.project_within is not None:
        root = f.project_within.rstrip("/")
        escaped = root.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        clauses.append("(s.project = ? OR s.project LIKE ? ESCAPE '\\')")
        args += [root, escaped + "/%"]
    return clauses, args


def unit_where(f: Filters) -> tuple[list[str], list[object]]:
    """SQL clauses on `units u` joined with `sessions s` for every filter."""
    clauses, args = session_where(f)
    if f.since is not None:
        clauses.append("u.ts >= ?")
        args.append(f.since)
    if f.until is not None:
        clauses.append("u.ts <= ?")
        args.append(f.until)
    for pk, from_seq in f.exclude:
        clauses.append("NOT (u.session_pk = ? AND u.seq >= ?)")
        args += [pk, from_seq]
    return clauses, args


def scan(conn: sqlite3.Connection, terms: list[str], f: Filters, *, mode: str,
         limit: int) -> tuple[int, list[tuple[int, float]]]:
    """(matches, [(unit id, score)] best first) over the newest WINDOW units."""
    probes = [probe(t) for t in terms]
    if not probes:
        return 0, []
    clauses, args = unit_where(f)
    top = conn.execute("SELECT coalesce(max(id), 0) FROM units").fetchone()[0]
    clauses.append("u.id > ?")
    args.append(top - WINDOW)
    rows = conn.execute(
        "SELECT u.id, lower(u.content), lower(coalesce(u.one_liner, '')) FROM units u "
        "JOIN sessions s ON s.id = u.session_pk WHERE " + " AND ".join(clauses), args)
    scored = []
    for uid, body, one in rows:
        n = sum(1 for p in probes if p in body) + 3 * sum(1 for p in probes if p in one)
        hit = sum(1 for p in probes if p in body or p in one)
        if hit and (mode != "and" or hit == len(probes)):
            scored.append((uid, float(n)))
    scored.sort(key=lambda x: (-x[1], -x[0]))
    return len(scored), scored[:limit]
