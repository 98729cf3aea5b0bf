"""Session summaries and unit one-liners: what is summarized, and storing the results.

A session's summary covers its units up to `summary_upto` (a seq); everything after
is "unsummarized". Each stored summary is also kept in `summaries` (the history of
segments, for daily notes) with what made it (`extractive` or the model) and the
prompt version. Setting a one-liner queues the unit for the search index
(`index_pending`) in the same transaction; the index picks it up with its next commit.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from memoryd.store.counters import read_counters, with_prefix

EXTRACTIVE = "extractive"

SESSION_FIELDS = (
    "id AS pk, agent, session_id, project, title, last_ts, created_at, next_seq, units, "
    "user_units, summary, summary_upto, summary_by, summary_prompt, summary_updated, "
    "summary_user_mark, one_liner_upto, machine"
)
UNIT_FIELDS = (
    "id, seq, turn, role, kind, content, tool_name, tool_args, related_id, ts, one_liner, "
    "one_liner_by, chars"
)


@dataclass(frozen=True, slots=True)
class Backlog:
    """What is unsummarized in one session."""

    pk: int
    upto: int
    messages: int  # units after `upto`
    chars: int  # user + assistant message characters after `upto`
    user_messages: int
    user_units: int  # user messages in the whole session
    user_mark: int  # user_units when a summary was last asked for
    one_liner_upto: int  # units after this have not been looked at for one-liners


def find_sessions(conn: sqlite3.Connection, session_id: str, agent: str | None = None,
                  machine: str | None = None) -> list[dict[str, Any]]:
    sql = f"SELECT {SESSION_FIELDS} FROM sessions WHERE session_id = ?"
    args: list[Any] = [session_id]
    for col, val in (("agent", agent), ("machine", machine)):
        if val is not None:
            sql += f" AND {col} = ?"
            args.append(val)
    return [dict(r) for r in conn.execute(sql + " ORDER BY id", args)]


def get_session(conn: sqlite3.Connection, pk: int) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {SESSION_FIELDS} FROM sessions WHERE id = ?", (pk,)).fetchone()
    return dict(row) if row else None


def backlogs(conn: sqlite3.Connection, pks: list[int]) -> list[Backlog]:
    out = []
    for pk in pks:
        s = conn.execute("SELECT summary_upto, user_units, summary_user_mark, one_liner_upto "
                         "FROM sessions WHERE id = ?", (pk,)).fetchone()
        if s is None:
            continue
        r = conn.execute(
            "SELECT count(*), coalesce(sum(CASE WHEN kind = 'message' AND role IN "
            "('user', 'assistant') THEN chars END), 0), "
            "count(*) FILTER (WHERE role = 'user' AND kind = 'message') "
            "FROM units WHERE session_pk = ? AND seq > ?", (pk, s[0])).fetchone()
        out.append(Backlog(pk, s[0], r[0], r[1], r[2], s[1], s[2], s[3]))
    return out


def buffer_cut(conn: sqlite3.Connection, pk: int, upto: int, keep: int) -> int | None:
    """Where a summary that leaves at least `keep` recent units out can stop: the seq of
    the latest user message after `upto` with at least `keep` units from it on. The
    summary covers (upto, cut - 1]; the kept tail starts with that user message. None
    when no such message exists (one long turn: it waits for the next user message or
    for the idle summary)."""
    if keep > 0:
        row = conn.execute("SELECT seq FROM units WHERE session_pk = ? ORDER BY seq DESC "
                           "LIMIT 1 OFFSET ?", (pk, keep - 1)).fetchone()
        if row is None:
            return None
        limit = row[0]
    else:
        limit = last_seq(conn, pk) + 1
    row = conn.execute(
        "SELECT max(seq) FROM units WHERE session_pk = ? AND role = 'user' AND kind = 'message' "
        "AND seq > ? AND seq <= ?", (pk, upto + 1, limit)).fetchone()
    # a user message right after `upto` would leave nothing to summarize before it
    return row[0]


def last_seq(conn: sqlite3.Connection, pk: int) -> int:
    row = conn.execute("SELECT max(seq) FROM units WHERE session_pk = ?", (pk,)).fetchone()
    return row[0] or 0


def units_between(conn: sqlite3.Connection, pk: int, after: int, upto: int) -> list[dict[str, Any]]:
    rows = conn.execute(f"SELECT {UNIT_FIELDS} FROM units WHERE session_pk = ? AND seq > ? "
                        "AND seq <= ? ORDER BY seq", (pk, after, upto))
    return [dict(r) for r in rows]


def calls_by_id(conn: sqlite3.Connection, pk: int, ids: list[str]) -> dict[str, dict[str, Any]]:
    """tool_call units by their call id (to name a result's tool and arguments)."""
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(
                f"SELECT related_id, tool_name, tool_args FROM units WHERE session_pk = ? "
                f"AND kind = 'tool_call' AND related_id IN ({marks})", (pk, *chunk)):
            out[r["related_id"]] = dict(r)
    return out


def recent_units(conn: sqlite3.Connection, pk: int, after: int,
                 limit: int) -> tuple[int, list[dict[str, Any]]]:
    """The units after `after` (the latest `limit` of them, in order) and their count."""
    total = conn.execute("SELECT count(*) FROM units WHERE session_pk = ? AND seq > ?",
                         (pk, after)).fetchone()[0]
    rows = conn.execute(
        "SELECT * FROM (SELECT seq, role, kind, content, ts, tool_name, one_liner FROM units "
        "WHERE session_pk = ? AND seq > ? ORDER BY seq DESC LIMIT ?) AS tail ORDER BY seq",
        (pk, after, limit))
    return total, [dict(r) for r in rows]


def save_summary(conn: sqlite3.Connection, pk: int, *, summary: str, from_seq: int, upto: int,
                 made_by: str, prompt_version: str, reason: str | None, now: float,
                 expect_upto: int | None = None) -> bool:
    """Store a session's rolling summary and its history row. With `expect_upto`, only
    when the stored summary still covers exactly that (an upgrade must not overwrite a
    newer summary). Returns whether it was stored."""
    sql = ("UPDATE sessions SET summary = ?, summary_upto = ?, summary_by = ?, "
           "summary_prompt = ?, summary_updated = ? WHERE id = ?")
    args: list[Any] = [summary, upto, made_by, prompt_version, now, pk]
    if expect_upto is not None:
        sql += " AND summary_upto = ?"
        args.append(expect_upto)
    if not conn.execute(sql, args).rowcount:
        return False
    conn.execute(
        "INSERT INTO summaries (session_pk, from_seq, upto_seq, summary, made_by, "
        "prompt_version, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (pk, from_seq, upto, summary, made_by, prompt_version, reason, now))
    return True


def mark_user_units(conn: sqlite3.Connection, pk: int) -> None:
    """Remember how many user messages the session had when a summary was asked for
    (the interval trigger counts from there)."""
    conn.execute("UPDATE sessions SET summary_user_mark = user_units WHERE id = ?", (pk,))


def summary_history(conn: sqlite3.Connection, pk: int) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT from_seq, upto_seq, summary, made_by, prompt_version, reason, "
                        "created_at FROM summaries WHERE session_pk = ? ORDER BY id", (pk,))
    return [dict(r) for r in rows]


# -- one-liners ----------------------------------------------------------------------------


def units_for_one_liners(conn: sqlite3.Connection, pk: int, after: int, tool_chars: int,
                         message_chars: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Long units after seq `after` that have no one-liner yet (tool calls and results
    of at least `tool_chars`, messages of at least `message_chars`), and the seq the
    scan reached (store it as the session's `one_liner_upto`)."""
    rows = [dict(r) for r in conn.execute(
        f"SELECT {UNIT_FIELDS} FROM units WHERE session_pk = ? AND seq > ? "
        "AND one_liner IS NULL AND ((kind IN ('tool_call', 'tool_result') AND chars >= ?) "
        "OR (kind IN ('message', 'compaction') AND chars >= ?)) ORDER BY seq LIMIT ?",
        (pk, after, max(1, tool_chars), max(1, message_chars), limit))]
    reached = rows[-1]["seq"] if len(rows) == limit else last_seq(conn, pk)
    return rows, reached


def count_for_one_liners(conn: sqlite3.Connection, pk: int, after: int, tool_chars: int,
                         message_chars: int) -> int:
    return conn.execute(
        "SELECT count(*) FROM units WHERE session_pk = ? AND seq > ? AND one_liner IS NULL "
        "AND ((kind IN ('tool_call', 'tool_result') AND chars >= ?) "
        "OR (kind IN ('message', 'compaction') AND chars >= ?))",
        (pk, after, max(1, tool_chars), max(1, message_chars))).fetchone()[0]


def extractive_units(conn: sqlite3.Connection, pk: int, limit: int) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute(
        f"SELECT {UNIT_FIELDS} FROM units WHERE session_pk = ? AND one_liner_by = ? "
        "ORDER BY seq LIMIT ?", (pk, EXTRACTIVE, limit))]


def save_one_liners(conn: sqlite3.Connection, items: list[tuple[int, str, str, str]], *,
                    only_if_by: str | None = None) -> int:
    """(unit id, one-liner, made by, prompt version) each; with `only_if_by`, only over a
    one-liner made by that (an upgrade replaces extractive lines, nothing else)."""
    n = 0
    for uid, line, made_by, prompt in items:
        sql = "UPDATE units SET one_liner = ?, one_liner_by = ?, one_liner_prompt = ? WHERE id = ?"
        args: list[Any] = [line, made_by, prompt, uid]
        if only_if_by is not None:
            sql += " AND one_liner_by = ?"
            args.append(only_if_by)
        if conn.execute(sql, args).rowcount:
            # derived: the unit stays searchable meanwhile (it keeps `caught_up` true)
            conn.execute("INSERT INTO index_pending (unit_id, derived) VALUES (?, 1)", (uid,))
            n += 1
    return n


def set_one_liner_upto(conn: sqlite3.Connection, pk: int, seq: int) -> None:
    conn.execute("UPDATE sessions SET one_liner_upto = greatest(one_liner_upto, ?) WHERE id = ?",
                 (seq, pk))


# -- what the triggers and the upgrade pass look for ---------------------------------------


def idle_sessions(conn: sqlite3.Connection, idle_before: float, min_messages: int,
                  active: dict[int, float] | None = None) -> list[int]:
    """Sessions whose last message is older than `idle_before` (or, without timestamps,
    that were created before it) with at least `min_messages` unsummarized units.
    `active`: sessions this process saw new units for, and when."""
    rows = conn.execute(
        "SELECT id, coalesce(last_ts, created_at) FROM sessions "
        "WHERE next_seq - 1 - summary_upto >= ?", (min_messages,)).fetchall()
    active = active or {}
    return [r[0] for r in rows if max(r[1] or 0.0, active.get(r[0], 0.0)) <= idle_before]


def sessions_with_backlog(conn: sqlite3.Connection, min_messages: int) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM sessions WHERE next_seq - 1 - summary_upto >= ? "
        "ORDER BY last_ts DESC NULLS LAST",
        (min_messages,))]


def sessions_with_new_long_units(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM sessions WHERE next_seq - 1 > one_liner_upto")]


def extractive_sessions(conn: sqlite3.Connection, limit: int) -> list[int]:
    """Sessions with an extractive summary or extractive one-liners, newest first."""
    rows = conn.execute(
        "SELECT id FROM sessions WHERE summary_by = ? OR EXISTS (SELECT 1 FROM units u "
        "WHERE u.session_pk = sessions.id AND u.one_liner_by = ?) "
        "ORDER BY coalesce(last_ts, created_at) DESC LIMIT ?", (EXTRACTIVE, EXTRACTIVE, limit))
    return [r[0] for r in rows]


def artifact_counts(conn: sqlite3.Connection) -> dict[str, Any]:
    """Summaries by maker and extractive one-liners, from the counters the triggers keep
    (m009): counting the one-liners read one index entry per unit, 1M after summaries."""
    c = read_counters(conn)
    return {"summaries_by": with_prefix(c, "summaries_by:"),
            "extractive_one_liners": c.get("extractive_one_liners", 0)}


# -- LLM usage (the daily budget) ----------------------------------------------------------


def record_usage(conn: sqlite3.Connection, *, ts: float, day: str, model: str, purpose: str,
                 target: str, input_tokens: int, output_tokens: int, cost: float, outcome: str,
                 error: str | None) -> None:
    conn.execute(
        "INSERT INTO llm_usage (ts, day, model, purpose, target, input_tokens, output_tokens, "
        "cost, outcome, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (ts, day, model, purpose, target, input_tokens, output_tokens, cost, outcome, error))


def usage_on(conn: sqlite3.Connection, day: str) -> dict[str, Any]:
    r = conn.execute(
        "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(cost), 0), count(*) FILTER (WHERE outcome NOT IN ('ok', 'malformed')) "
        "FROM llm_usage WHERE day = ?", (day,)).fetchone()
    return {"calls": r[0], "input_tokens": r[1], "output_tokens": r[2], "cost": r[3],
            "errors": r[4], "tokens": r[1] + r[2]}


def usage_by_target(conn: sqlite3.Connection) -> dict[str, int]:
    """Successful calls per target (tests and benchmarks count with it)."""
    return {r[0]: r[1] for r in conn.execute(
        "SELECT target, count(*) FROM llm_usage WHERE outcome = 'ok' GROUP BY target")}
