"""Sessions: one row per (agent, machine, session id). In fleet mode two machines' files
with the same session id (two `chat.jsonl`) are two sessions; in SQLite mode the machine
is '' and a session is (agent, session id) as it always was."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from memoryd.errors import ConflictError, NotFoundError
from memoryd.store import unit_quarters
from memoryd.store.counters import counter


def session_pk(conn: sqlite3.Connection, agent: str, session_id: str,
               project: str | None = None, title: str | None = None,
               machine: str = "") -> int:
    """The row id of a session, created on first sight; project and title follow the
    latest line that tells them."""
    now = time.time()
    row = conn.execute(
        "SELECT id, project, title FROM sessions WHERE agent = ? AND machine = ? "
        "AND session_id = ?", (agent, machine, session_id),
    ).fetchone()
    if row is None:
        return conn.execute(
            "INSERT INTO sessions (agent, machine, session_id, project, title, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (agent, machine, session_id, project, title, now, now),
        ).fetchone()[0]
    if (project and project != row["project"]) or (title and title != row["title"]):
        conn.execute(
            "UPDATE sessions SET project = coalesce(?, project), title = coalesce(?, title), "
            "updated_at = ? WHERE id = ?",
            (project, title, now, row["id"]),
        )
    return int(row["id"])


SESSION_COLUMNS = (
    "s.agent, s.session_id, s.machine, s.project, s.title, s.first_ts, s.last_ts, s.units, "
    "s.user_units, s.turns, s.state"
)


def list_sessions(conn: sqlite3.Connection, *, agent: str | None = None,
                  project: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    where, args = _filters(agent=agent, project=project)
    rows = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions s {where} "
        "ORDER BY coalesce(s.last_ts, 0) DESC, s.id DESC LIMIT ?",
        (*args, limit),
    ).fetchall()
    return [dict(r) for r in rows]


def count_sessions(conn: sqlite3.Connection) -> int:
    """From the counter the triggers keep (m009)."""
    return counter(conn, "sessions")


def _filters(**kw: Any) -> tuple[str, list[Any]]:
    clauses, args = [], []
    for col, val in kw.items():
        if val is not None:
            clauses.append(f"s.{col} = ?")
            args.append(val)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", args


def _identity(sql: str, args: list[Any], agent: str | None,
              machine: str | None) -> str:
    """`sql` narrowed to one agent and/or one machine (a fleet's machines may each have
    a session of the same id: nanobot's `cli_direct`, a generic `chat`)."""
    for col, val in (("agent", agent), ("machine", machine)):
        if val is not None:
            sql += f" AND s.{col} = ?"
            args.append(val)
    return sql


def find_sessions(conn: sqlite3.Connection, session_id: str, agent: str | None = None,
                  machine: str | None = None) -> list[sqlite3.Row]:
    args: list[Any] = [session_id]
    sql = _identity(f"SELECT s.id AS pk, {SESSION_COLUMNS}, s.summary, s.summary_upto "
                    "FROM sessions s WHERE s.session_id = ?", args, agent, machine)
    return conn.execute(sql + " ORDER BY s.agent, s.machine", args).fetchall()


def pick_one(rows: list[Any], session_id: str, agent: str | None,
             machine: str | None) -> Any:
    """The one session `rows` (found for this id, agent and machine) name, or the error
    that says what to add: `?agent=` when the same id exists for several agents,
    `?machine=` when it exists on several machines of a fleet."""
    if not rows:
        of = "".join(f" {w} {v}" for w, v in (("of", agent), ("on", machine)) if v is not None)
        raise NotFoundError(f"no session {session_id!r}{of}", field="id")
    if len(rows) == 1:
        return rows[0]
    if len({r["agent"] for r in rows}) > 1:
        agents = ", ".join(sorted({r["agent"] for r in rows}))
        raise ConflictError(f"session id {session_id!r} exists for several agents ({agents}); "
                            "add ?agent=", field="agent")
    machines = ", ".join(sorted(r["machine"] or "''" for r in rows))
    raise ConflictError(f"session id {session_id!r} exists on several machines ({machines}); "
                        "add ?machine= (memoryctl: --machine)", field="machine")


def find_sessions_by_prefix(conn: sqlite3.Connection, prefix: str, agent: str | None = None,
                            limit: int = 6, machine: str | None = None) -> list[sqlite3.Row]:
    """Sessions whose id starts with `prefix` (as git takes a unique prefix of a hash)."""
    args: list[Any] = [len(prefix), prefix]
    sql = _identity(f"SELECT s.id AS pk, {SESSION_COLUMNS}, s.summary, s.summary_upto "
                    "FROM sessions s WHERE substr(s.session_id, 1, ?) = ?", args, agent,
                    machine)
    return conn.execute(sql + " ORDER BY s.session_id LIMIT ?", (*args, limit)).fetchall()


def resolve_session(conn: sqlite3.Connection, session_id: str, agent: str | None,
                    field: str = "id", machine: str | None = None) -> sqlite3.Row:
    """The session with this id, or the only one whose id starts with it: every verb
    that takes a session id (show, messages, forget, export, summarize, archive restore)
    resolves it here, so a unique prefix works in all of them. An ambiguous prefix is a
    409 naming the candidates; `field` is the request's name for the id. In a fleet,
    `machine` picks one of several machines' sessions of the same id (`pick_one`)."""
    rows = find_sessions(conn, session_id, agent, machine)
    if not rows and session_id:
        rows = find_sessions_by_prefix(conn, session_id, agent, limit=50, machine=machine)
        # a session and its sub-agents ("<id>/agent-...") share a prefix: the session
        parents = [r for r in rows if all(o["session_id"] == r["session_id"] or
                                          o["session_id"].startswith(r["session_id"] + "/")
                                          for o in rows)]
        if len({r["session_id"] for r in parents}) == 1:
            rows = parents
        if len(rows) > 1 and len({r["session_id"] for r in rows}) > 1:
            shown = ", ".join(r["session_id"] for r in rows[:5])
            more = ", ..." if len(rows) > 5 else ""
            raise ConflictError(f"session id prefix {session_id!r} is ambiguous: {shown}{more}",
                                field=field)
    if not rows:
        of = "".join(f" {w} {v}" for w, v in (("of", agent), ("on", machine)) if v is not None)
        raise NotFoundError(f"no session {session_id!r}{of}", field=field)
    return pick_one(rows, session_id, agent, machine)


def page_sessions(conn: sqlite3.Connection, *, agent: str | None, project: str | None,
                  since: float | None, until: float | None, limit: int,
                  after: tuple[float, int] | None) -> list[dict[str, Any]]:
    """Sessions by last activity, newest first; `after` is the (last_ts, pk) of the
    previous page's last row (keyset paging: stable while new sessions arrive)."""
    where, args = _filters(agent=agent, project=project)
    clauses = [where[len("WHERE "):]] if where else []
    if since is not None:
        clauses.append("coalesce(s.last_ts, 0) >= ?")
        args.append(since)
    if until is not None:
        clauses.append("coalesce(s.first_ts, 0) < ?")
        args.append(until)
    if after is not None:
        clauses.append("(coalesce(s.last_ts, 0) < ? OR (coalesce(s.last_ts, 0) = ? AND s.id < ?))")
        args += [after[0], after[0], after[1]]
    sql_where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    rows = conn.execute(
        f"SELECT s.id AS pk, {SESSION_COLUMNS} FROM sessions s {sql_where} "
        "ORDER BY coalesce(s.last_ts, 0) DESC, s.id DESC LIMIT ?", (*args, limit)).fetchall()
    return [dict(r) for r in rows]


def role_counts(conn: sqlite3.Connection, pk: int) -> dict[str, int]:
    return {r[0]: r[1] for r in conn.execute(
        "SELECT role, count(*) FROM units WHERE session_pk = ? GROUP BY role", (pk,))}


def session_files(conn: sqlite3.Connection, pk: int) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT f.path FROM units u JOIN files f ON f.id = u.file_id "
        "WHERE u.session_pk = ? ORDER BY f.path", (pk,))]


def messages_after(conn: sqlite3.Connection, pk: int, after_seq: int,
                   limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT u.id AS unit_id, u.record_id, u.seq, u.turn, u.role, u.kind, u.content, "
        "u.tool_name, u.related_id, u.ts, u.one_liner, f.path, u.offset FROM units u "
        "LEFT JOIN files f ON f.id = u.file_id WHERE u.session_pk = ? AND u.seq > ? "
        "ORDER BY u.seq LIMIT ?", (pk, after_seq, limit)).fetchall()
    return [dict(r) for r in rows]


def forget_session(conn: sqlite3.Connection, pk: int) -> int:
    """Delete a session everywhere: its units, their index rows, its summary (on the
    session row) and anything keyed to it. File cursors stay where they are, so the
    forgotten lines are not read again unless the file grows."""
    n = delete_session_units(conn, pk)
    # jobs still waiting for it; summaries go with the session row (ON DELETE CASCADE)
    conn.execute("DELETE FROM jobs WHERE target = ? AND state = 'pending'", (f"session:{pk}",))
    conn.execute("DELETE FROM sessions WHERE id = ?", (pk,))
    return int(n)


def delete_session_units(conn: sqlite3.Connection, pk: int) -> int:
    """Delete a session's units and their index rows (forget, and archival: the session
    row with its summary stays there)."""
    n = conn.execute("SELECT count(*) FROM units WHERE session_pk = ?", (pk,)).fetchone()[0]
    # the search index drops them when its writer next runs (memoryd.index.indexer)
    conn.execute("INSERT INTO index_pending (unit_id) "
                 "SELECT id FROM units WHERE session_pk = ?", (pk,))
    unit_quarters.drop_session(conn, pk)  # at once, not quarter by quarter as the units go
    conn.execute("DELETE FROM units WHERE session_pk = ?", (pk,))
    return int(n)


def forget_units(conn: sqlite3.Connection, unit_ids: list[int]) -> dict[int, int]:
    """Delete these units everywhere, like `forget_session` but unit by unit (its twin:
    change both together): their index rows, the rows, and the counters of their
    sessions. The sessions' summaries, which may quote them, are dropped for rebuilding.
    Returns {session pk: units deleted}."""
    per: dict[int, int] = {}
    for i in range(0, len(unit_ids), 500):
        chunk = unit_ids[i:i + 500]
        marks = ",".join("?" * len(chunk))
        for pk, n in conn.execute(f"SELECT session_pk, count(*) FROM units WHERE id IN "
                                  f"({marks}) GROUP BY session_pk", chunk):
            per[pk] = per.get(pk, 0) + n
        # the search index drops them when its writer next runs (memoryd.index.indexer)
        conn.execute(f"INSERT INTO index_pending (unit_id) SELECT id FROM units "
                     f"WHERE id IN ({marks})", chunk)
        conn.execute(f"DELETE FROM units WHERE id IN ({marks})", chunk)
    for pk in per:
        conn.execute(
            "UPDATE sessions SET units = (SELECT count(*) FROM units WHERE session_pk = :pk), "
            "user_units = (SELECT count(*) FROM units WHERE session_pk = :pk AND role = 'user' "
            "AND kind = 'message'), summary = NULL, summary_upto = 0, summary_by = NULL, "
            "summary_prompt = NULL, summary_user_mark = 0, "
            "summary_updated = NULL, updated_at = :now WHERE id = :pk",
            {"pk": pk, "now": time.time()})
        conn.execute("DELETE FROM summaries WHERE session_pk = ?", (pk,))
    return per
