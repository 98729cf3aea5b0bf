"""The timeline: sessions by the local day they were active, newest day first, across
agents (or one agent, or one project): per day each session's agent, project, time span,
messages that day and its one line (summary or title). Pages are date ranges of DAYS days
ending at `until`; "older" skips straight to the next day that has anything."""

from __future__ import annotations

import sqlite3
from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from memoryd.errors import BadRequestError
from memoryd.server.app import SERVICES
from memoryd.web.auth import WebSession
from memoryd.web.pages import session_url
from memoryd.web.routes import WebDeps, render

DAYS = 7
LINE_CHARS = 200


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


def load(c: sqlite3.Connection, agent: str | None, project: str | None,
         until: date | None) -> dict[str, Any]:
    where, args = _filters(agent, project)
    if until is None:  # the newest day with anything
        ts = c.execute(f"SELECT max(u.ts) FROM units u JOIN sessions s ON s.id = u.session_pk "
                       f"WHERE u.ts IS NOT NULL{where}", args).fetchone()[0]
        until = datetime.fromtimestamp(ts).date() if ts else date.today()
    first = until - timedelta(days=DAYS - 1)
    lo, hi = _midnight(first), _midnight(until + timedelta(days=1))
    rows = c.execute(
        "SELECT s.id AS pk, s.agent, s.session_id, s.project, s.title, s.summary, "
        "date(u.ts, 'unixepoch', 'localtime') AS day, min(u.ts) AS start, max(u.ts) AS end, "
        "count(*) AS n FROM units u JOIN sessions s ON s.id = u.session_pk "
        f"WHERE u.ts >= ? AND u.ts < ?{where} GROUP BY s.id, day ORDER BY day DESC, end DESC",
        [lo, hi, *args]).fetchall()
    days: dict[str, list[dict[str, Any]]] = {}
    for r in map(dict, rows):
        r["line"] = _one_line(r.pop("summary"), r["title"])
        r["url"] = session_url(r["agent"], r["session_id"])
        days.setdefault(r["day"], []).append(r)
    older = c.execute(f"SELECT max(u.ts) FROM units u JOIN sessions s ON s.id = u.session_pk "
                      f"WHERE u.ts < ?{where}", [lo, *args]).fetchone()[0]
    newer = c.execute(f"SELECT min(u.ts) FROM units u JOIN sessions s ON s.id = u.session_pk "
                      f"WHERE u.ts >= ?{where}", [hi, *args]).fetchone()[0]
    return {"days": [(date.fromisoformat(d), v) for d, v in days.items()], "first": first,
            "until": until,
            "older": datetime.fromtimestamp(older).date() if older else None,
            "newer": (datetime.fromtimestamp(newer).date() + timedelta(days=DAYS - 1)
                      if newer else None)}


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
                  older_url=link(data["older"]), newer_url=link(data["newer"]),
                  project_url=lambda p: "/timeline?" + urlencode({**keep, "project": p}),
                  agent_url=lambda a: "/timeline?" + urlencode({**keep, "agent": a}))
