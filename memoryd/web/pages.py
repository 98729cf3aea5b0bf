"""Overview, search and the sessions list. Each calls what the API handler of the same
thing calls (status(), search.search, the sessions SQL functions, the summaries service)."""

from __future__ import annotations

import json
import sqlite3
from datetime import date, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from memoryd.api import SearchRequest, SessionsQuery
from memoryd.errors import BadRequestError
from memoryd.http.services import SERVICES
from memoryd.recall import search as search_service
from memoryd.store import sessions as sql
from memoryd.web import dashboard
from memoryd.web.auth import WebSession
from memoryd.web.deps import WebDeps
from memoryd.web.page import render

# status keys the overview lays out itself; any other key is shown as it comes
KNOWN = {"version", "pid", "state", "uptime_s", "socket", "tcp_port", "sources", "files",
         "ignored_files", "bad_lines", "sessions", "units", "unread_bytes", "queue_depth",
         "backfill_done", "caught_up", "ingest_lag_ms", "ingest", "watcher", "llm",
         "summaries", "consolidation"}


def _opt(request: web.Request, name: str) -> str | None:
    v = request.query.get(name, "").strip()
    return v or None


def _day(request: web.Request, name: str) -> date | None:
    v = _opt(request, name)
    if v is None:
        return None
    try:
        return date.fromisoformat(v)
    except ValueError:
        raise BadRequestError(f"{name}: expected a date like 2026-01-31", field=name) from None


def session_url(agent: str, session_id: str, **q: Any) -> str:
    query = urlencode({"agent": agent, **{k: v for k, v in q.items() if v is not None}})
    return f"/sessions/{quote(session_id, safe='/')}?{query}"


async def overview(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    services = request.app[SERVICES]
    status = await services.status()
    other = {k: v for k, v in status.items() if k not in KNOWN}
    budget = ((status.get("llm") or {}).get("budget") or {}).get("daily_tokens")
    charts = await dashboard.charts(services.store, budget)
    raw = json.dumps(status, indent=1, ensure_ascii=False, default=str)
    return render(request, "overview.html", title="Overview", s=status, other=other,
                  charts=charts, raw=raw)


async def search(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    q = _opt(request, "q")
    form = {k: request.query.get(k, "") for k in ("q", "agent", "project", "since", "until",
                                                  "mode")}
    since, until = _day(request, "since"), _day(request, "until")
    resp = None
    results: list[dict[str, Any]] = []
    if q:
        dated = since is not None or until is not None
        req = SearchRequest(query=q, mode=form["mode"] or "or", agent=_opt(request, "agent"),
                            project=_opt(request, "project"), max_results=200 if dated else 50)
        services = request.app[SERVICES]
        resp = await search_service.search(services.store, req, services.archive_dir,
                                             services.embed)
        lo = datetime.combine(since, datetime.min.time()).timestamp() if since else None
        hi = (datetime.combine(until + timedelta(days=1), datetime.min.time()).timestamp()
              if until else None)
        for r in resp.results:
            if (lo is not None and (r.ts or 0) < lo) or (hi is not None and (r.ts or 0) >= hi):
                continue
            d = r.model_dump()
            d["terms"] = (r.why or {}).get("matched") or q.split()
            d["url"] = (session_url(r.agent, r.session_id) if r.unit_id is None  # archived
                        else session_url(r.agent, r.session_id, unit=r.unit_id)
                        + f"#u{r.unit_id}")
            results.append(d)
        results = results[:50]
    return render(request, "search.html", title="Search", form=form, resp=resp,
                  results=results)


async def sessions(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    q = SessionsQuery.model_validate({k: v for k, v in request.query.items() if v.strip()})
    after = None
    if q.cursor:
        ts, _, pk = q.cursor.partition(":")
        after = (float(ts), int(pk))
    rows = await request.app[SERVICES].store.read(lambda c: sql.page_sessions(
        c, agent=q.agent, project=q.project, since=q.since and q.since.timestamp(),
        until=q.until and q.until.timestamp(), limit=q.limit, after=after))
    nxt = None
    if len(rows) == q.limit:
        keep = {k: v for k, v in request.query.items() if k != "cursor" and v.strip()}
        nxt = "/sessions?" + urlencode({**keep, "cursor": f"{rows[-1]['last_ts'] or 0}:"
                                                          f"{rows[-1]['pk']}"})
    for r in rows:
        r["url"] = session_url(r["agent"], r["session_id"])
    form = {k: request.query.get(k, "") for k in ("agent", "project", "since")}
    return render(request, "sessions.html", title="Sessions", rows=rows, next=nxt, form=form)


async def export(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    sid, agent = request.match_info["id"], _opt(request, "agent")

    def load(c: sqlite3.Connection) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        row = sql.resolve_session(c, sid, agent)
        out: list[dict[str, Any]] = []
        after = 0
        while batch := sql.messages_after(c, row["pk"], after, 1000):
            out += batch
            after = batch[-1]["seq"]
        return dict(row), out

    row, msgs = await request.app[SERVICES].store.read(load)
    lines = [f"# {row['title'] or row['session_id']}", "",
             f"- agent: {row['agent']}", f"- session: {row['session_id']}",
             f"- project: {row['project'] or '—'}", ""]
    for m in msgs:
        who = m["role"] + (f" · {m['tool_name']}" if m["tool_name"] else "")
        stamp = datetime.fromtimestamp(m["ts"]).isoformat(timespec="seconds") if m["ts"] else ""
        lines += [f"## {m['seq']}. {who} {stamp}".rstrip(), "", m["content"], ""]
    name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in row["session_id"])[-80:]
    return web.Response(text="\n".join(lines), content_type="text/markdown", charset="utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{name}.md"',
                                 "Cache-Control": "no-store"})


async def forget_confirm(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    sid, agent = request.match_info["id"], _opt(request, "agent")
    row = await request.app[SERVICES].store.read(
        lambda c: dict(sql.resolve_session(c, sid, agent)))
    return render(request, "forget.html", title="Forget session", s=row,
                  action=f"/sessions/{quote(row['session_id'], safe='/')}/forget?"
                         + urlencode({"agent": row["agent"]}),
                  back=session_url(row["agent"], row["session_id"]))


async def forget(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    sid, agent = request.match_info["id"], _opt(request, "agent")
    services = request.app[SERVICES]

    def run(c: sqlite3.Connection) -> dict[str, Any]:
        row = sql.resolve_session(c, sid, agent)
        return {"agent": row["agent"], "session_id": sid,
                "units_deleted": sql.forget_session(c, row["pk"])}

    data = await services.store.write(run)
    services.events.publish("session_forgotten", agent=data["agent"], session_id=sid)
    return render(request, "forget.html", title="Forgotten", done=data)


async def summarize(request: web.Request, deps: WebDeps, s: WebSession) -> web.StreamResponse:
    sid, agent = request.match_info["id"], _opt(request, "agent")
    job = await deps.summaries.summarize(sid, agent, wait=False)
    row = await deps.summaries.resolve(sid, agent)
    raise web.HTTPSeeOther(session_url(row["agent"], row["session_id"],
                                       queued=job.get("job_id")))
