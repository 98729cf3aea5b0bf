"""The timeline: sessions by the local day they were active, newest day first, across
agents (or one agent, or one project): per day each session's agent, project, time span,
messages that day and its one line (summary or title). Pages are date ranges of DAYS days
ending at `until`; "older" and "newer" skip over days when nothing happened."""

from __future__ import annotations

import sqlite3
from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from memoryd.errors import BadRequestError
from memoryd.http.services import SERVICES
from memoryd.store import unit_quarters
from memoryd.web.auth import WebSession
from memoryd.web.deps import WebDeps
from memoryd.web.page import render
from memoryd.web.pages import session_url

DAYS = 7
LINE_CHARS = 200
PER_DAY = 100  # sessions listed a day (the newest): a page stays readable and light


def _midnight(d: date) -> float:
    return datetime.combine(d, datetime.min.time()).timestamp()


def _filters(agent: str | None, project: str | None) -> tuple[str, list[Any]]:
    sql, args = "", []
    if agent:
        sql, args = sql + " AND s.agent = ?", [*args, agent]
    if project:
        sql, args = sql + " AND s.project = ?", [*args, project]
    return sql, args


def _one_line(summary: str | None, title: str | None) -> str:
    for line in (summary or "").splitlines():
        line = line.strip().lstrip("#-* ").strip()
        if line:
            return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
    return title or ""


def _day(ts: float | None) -> date | None:
    return datetime.fromtimestamp(ts).date() if ts else None


def load(c: sqlite3.Connection, agent: str | None, project: str | None,
         until: date | None) -> dict[str, Any]:
    """The days from `until` - DAYS + 1 to `until` (default: the newest day with anything).
    Which sessions, and where the pages before and after start, come from the sessions
    table; the per-day counts from the sessions' messages per quarter hour
    (unit_quarters: local days as runs of quarters, exact in every zone and across a DST
    change), so the page reads a row per session-quarter, not every message of the week."""
    where, args = _filters(agent, project)
    if until is None:
        until = _day(c.execute(f"SELECT max(s.last_ts) FROM sessions s WHERE 1 = 1{where}",
                               args).fetchone()[0]) or date.today()
    first = until - timedelta(days=DAYS - 1)
    lo, hi = _midnight(first), _midnight(until + timedelta(days=1))
    sessions = {r["pk"]: dict(r) for r in c.execute(
        "SELECT s.id AS pk, s.agent, s.session_id, s.project, s.title, s.summary "
        "FROM sessions s WHERE coalesce(s.last_ts, 0) >= ? AND coalesce(s.first_ts, 0) < ?"
        f"{where}", [lo, hi, *args])}
    counts: dict[tuple[int, int], list[Any]] = {}
    if sessions:
        bounds = [_midnight(first + timedelta(days=i)) for i in range(DAYS + 1)]
        only = list(sessions) if where and len(sessions) <= 500 else None
        counts = unit_quarters.day_counts(c, bounds, only)
    days: dict[int, list[dict[str, Any]]] = {}
    for (pk, d), (start, end, n) in sorted(counts.items()):
        sess = sessions.get(pk)
        if sess is None:
            continue
        days.setdefault(d, []).append({**sess, "start": start, "end": end, "n": n})
    for rows in days.values():
        rows.sort(key=lambda x: -x["end"])
        for r in rows[:PER_DAY]:  # the ones the page lists: their line and link
            r["line"] = _one_line(r["summary"], r["title"])
            r["url"] = session_url(r["agent"], r["session_id"])
    # the newest message before the window is in a session that began before it: one
    # still running at `lo` had its last before-window message near `lo`
    # (CASE, not SQLite's two-argument min and max: the fleet's PostgreSQL reads this too)
    older = c.execute("SELECT max(CASE WHEN coalesce(s.last_ts, 0) < ? THEN "
                      "coalesce(s.last_ts, 0) ELSE ? END) FROM sessions s "
                      f"WHERE coalesce(s.first_ts, 0) < ?{where}",
                      [lo - 1, lo - 1, lo, *args]).fetchone()[0]
    newer = c.execute("SELECT min(CASE WHEN coalesce(s.first_ts, 0) > ? THEN "
                      "coalesce(s.first_ts, 0) ELSE ? END) FROM sessions s "
                      f"WHERE coalesce(s.last_ts, 0) >= ?{where}",
                      [hi, hi, hi, *args]).fetchone()[0]
    return {"days": [(first + timedelta(days=d), v) for d, v in sorted(days.items(),
                                                                      reverse=True)],
            "first": first, "until": until, "older": _day(older) if older else None,
            "newer": _day(newer) + timedelta(days=DAYS - 1) if newer else None}


async def timeline(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    form = {k: request.query.get(k, "").strip() for k in ("agent", "project", "until")}
    until = None
    if form["until"]:
        try:
            until = date.fromisoformat(form["until"])
        except ValueError:
            raise BadRequestError("until: expected a date like 2026-01-31",
                                  field="until") from None
    agent, project = form["agent"] or None, form["project"] or None
    data = await request.app[SERVICES].store.read(lambda c: load(c, agent, project, until))
    keep = {k: v for k, v in (("agent", agent), ("project", project)) if v}

    def link(d: date | None) -> str | None:
        return None if d is None else "/timeline?" + urlencode({**keep, "until": d.isoformat()})

    return render(request, "timeline.html", title="Timeline", form=form, **data,
                  per_day=PER_DAY,
                  older_url=link(data["older"]), newer_url=link(data["newer"]),
                  project_url=lambda p: "/timeline?" + urlencode({**keep, "project": p}),
                  agent_url=lambda a: "/timeline?" + urlencode({**keep, "agent": a}))
