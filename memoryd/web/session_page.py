"""A session to read: its messages in pages of PAGE, a jump to its summary and to any turn
(`#turn-N`), and one message's full text. A search hit links here with `unit=ID#uID`: the
page holding that message opens with it marked, however deep in the session it is."""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from memoryd.errors import BadRequestError, NotFoundError
from memoryd.http.services import SERVICES
from memoryd.store import sessions as sql
from memoryd.web import turns
from memoryd.web.auth import SECURITY_HEADERS, WebSession
from memoryd.web.deps import WebDeps
from memoryd.web.page import render
from memoryd.web.pages import session_url

PAGE = 100  # messages a page
MAX_INT = 2**62  # page, turn and message numbers: anything larger names nothing
NEAR = 3  # page links shown either side of the current one (plus the first and last)
COLUMNS = ("u.id AS unit_id, u.seq, u.turn, u.role, u.kind, u.content, u.tool_name, "
           "u.tool_args, u.ts, u.one_liner")


def _int(request: web.Request, name: str) -> int | None:
    v = request.query.get(name, "").strip()
    if not v:
        return None
    if not v.isdigit() or not 1 <= int(v) <= MAX_INT:
        raise BadRequestError(f"{name}: expected a whole number from 1 to {MAX_INT}",
                              field=name)
    return int(v)


class Pages:
    """Where each page of a session starts. Seqs run 1, 2, 3… with no gap in a session as
    ingest writes it, so a page is a seq range found by the (session_pk, seq) index; a
    session with gaps (units removed) pages by rank instead (LIMIT/OFFSET)."""

    def __init__(self, c: sqlite3.Connection, pk: int) -> None:
        self.c, self.pk = c, pk
        lo, hi, self.total = c.execute("SELECT min(seq), max(seq), count(*) FROM units "
                                       "WHERE session_pk = ?", (pk,)).fetchone()
        self.lo = lo or 0
        self.dense = self.total > 0 and hi - lo + 1 == self.total
        self.count = max(1, -(-self.total // PAGE))

    def of(self, seq: int) -> int:
        if self.dense:
            rank = seq - self.lo + 1
        else:
            rank = self.c.execute("SELECT count(*) FROM units WHERE session_pk = ? AND seq <= ?",
                                  (self.pk, seq)).fetchone()[0]
        return max(1, (rank - 1) // PAGE + 1)

    def rows(self, page: int, columns: str, limit: int = PAGE) -> list[sqlite3.Row]:
        if self.dense:
            start = self.lo + (page - 1) * PAGE
            return self.c.execute(f"SELECT {columns} FROM units u WHERE u.session_pk = ? "
                                  "AND u.seq >= ? ORDER BY u.seq LIMIT ?",
                                  (self.pk, start, limit)).fetchall()
        return self.c.execute(f"SELECT {columns} FROM units u WHERE u.session_pk = ? "
                              "ORDER BY u.seq LIMIT ? OFFSET ?",
                              (self.pk, limit, (page - 1) * PAGE)).fetchall()

    def pager(self, current: int) -> list[dict[str, Any]]:
        """Links to the first and last pages and those near the current one, each with
        the turn it starts at; {"n": None} stands for the pages left out between."""
        shown = sorted({1, self.count, *range(max(1, current - NEAR),
                                              min(self.count, current + NEAR) + 1)})
        out: list[dict[str, Any]] = []
        for p in shown:
            if out and p > out[-1]["n"] + 1:
                out.append({"n": None})
            first = self.rows(p, "u.turn", limit=1)
            out.append({"n": p, "turn": first[0][0] if first else None,
                        "current": p == current})
        return out


def _messages(pages: Pages, page: int) -> list[dict[str, Any]]:
    out = []
    for r in map(dict, pages.rows(page, COLUMNS)):
        if r["kind"] in ("tool_call", "tool_result"):
            text = turns.tool_text(r)
            r["shown"], r["left_out"] = turns.clip(text)
        else:
            r["html"] = turns.markdown(r["content"])
        out.append(r)
    return out


async def session(request: web.Request, deps: WebDeps, s: WebSession) -> web.StreamResponse:
    sid, agent = request.match_info["id"], request.query.get("agent", "").strip() or None
    unit, turn, want = _int(request, "unit"), _int(request, "turn"), _int(request, "page")

    def load(c: sqlite3.Connection) -> dict[str, Any]:
        row = sql.resolve_session(c, sid, agent)
        pk = row["pk"]
        pages = Pages(c, pk)
        page, focus, jump = min(want or 1, pages.count), None, None
        if unit is not None:
            hit = c.execute("SELECT seq FROM units WHERE id = ? AND session_pk = ?",
                            (unit, pk)).fetchone()
            if hit is not None:
                page, focus = pages.of(hit[0]), unit
        elif turn is not None:  # the first message of that turn, or of the next one held
            hit = c.execute("SELECT seq, turn FROM units WHERE session_pk = ? AND turn >= ? "
                            "ORDER BY turn, seq LIMIT 1", (pk, turn)).fetchone()
            if hit is None:
                hit = c.execute("SELECT seq, turn FROM units WHERE session_pk = ? "
                                "ORDER BY seq DESC LIMIT 1", (pk,)).fetchone()
            if hit is not None:
                jump = (pages.of(hit[0]), hit[1])
        return {"s": {**dict(row), "roles": sql.role_counts(c, pk),
                      "files": sql.session_files(c, pk), "total": pages.total},
                "messages": _messages(pages, page), "page": page, "pages": pages.count,
                "pager": pages.pager(page), "focus": focus, "jump": jump}

    data = await request.app[SERVICES].store.read(load)
    srow = data["s"]
    if data["jump"] is not None:  # a redirect carries the #turn-N the form cannot
        p, t = data["jump"]
        raise web.HTTPSeeOther(session_url(srow["agent"], srow["session_id"], page=p)
                               + f"#turn-{t}")
    summary = await deps.summaries.get_summary(srow["session_id"], srow["agent"], 0)
    msgs, seen = data["messages"], set()
    for m in msgs:  # the anchor of a turn sits on its first message
        m["turn_anchor"] = m["turn"] not in seen
        seen.add(m["turn"])
    base = session_url(srow["agent"], srow["session_id"])
    return render(request, "session.html", title=srow["title"] or srow["session_id"],
                  s=srow, summary=summary,
                  summary_html=turns.markdown(summary.get("summary")), messages=msgs,
                  focus_unit=data["focus"], base=base, page=data["page"],
                  pages=data["pages"], pager=data["pager"], per_page=PAGE,
                  queued=request.query.get("queued", "").strip() or None,
                  action_base=f"/sessions/{quote(srow['session_id'], safe='/')}",
                  agent_q=urlencode({"agent": srow["agent"]}))


async def unit_text(request: web.Request, deps: WebDeps, s: WebSession) -> web.StreamResponse:
    """One message's whole text, laid out as on the page (plain text: nothing in it runs)."""
    sid, agent = request.match_info["id"], request.query.get("agent", "").strip() or None
    uid = int(request.match_info["unit"])
    if uid > MAX_INT:
        raise NotFoundError(f"no message {uid} in session {sid}")

    def load(c: sqlite3.Connection) -> dict[str, Any] | None:
        row = sql.resolve_session(c, sid, agent)
        got = c.execute(f"SELECT {COLUMNS} FROM units u WHERE u.id = ? AND u.session_pk = ?",
                        (uid, row["pk"])).fetchone()
        return dict(got) if got else None

    m = await request.app[SERVICES].store.read(load)
    if m is None:
        raise NotFoundError(f"no message {uid} in session {sid}")
    text = (turns.tool_text(m) if m["kind"] in ("tool_call", "tool_result")
            else m["content"] or "")
    return web.Response(text=text, content_type="text/plain", charset="utf-8",
                        headers=SECURITY_HEADERS)
