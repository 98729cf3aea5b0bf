"""Memory (MEMORY.md entries, daily notes, HISTORY.md) and the context preview. Writes
go through MemoryFile, as the memory API's do: atomic, locked, compare-and-swap on the
version the page was rendered from."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import date
from pathlib import Path, PurePath
from typing import Any

from aiohttp import web

from memoryd.api import ContextRequest
from memoryd.errors import BadRequestError
from memoryd.http.services import SERVICES
from memoryd.memory import format_entry, format_lines, split_items, split_lines
from memoryd.memory.document import item_key
from memoryd.store import memories
from memoryd.store import sessions as sql
from memoryd.web.auth import WebSession
from memoryd.web.deps import WebDeps
from memoryd.web.page import render
from memoryd.web.pages import session_url

DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
HISTORY = "HISTORY.md"
MAX_NOTE_BYTES = 1 << 20


def _notes(memory_dir: Path, day: str | None
           ) -> tuple[list[str], str | None, str | None, str | None]:
    """Daily notes' dates (newest first), the chosen one's text, HISTORY.md's text."""
    try:
        days = sorted((p.stem for p in memory_dir.glob("????-??-??.md")
                       if DAY.match(p.stem)), reverse=True)
    except OSError:
        days = []
    pick = day if day in days else (days[0] if days else None)
    text = _read(memory_dir / f"{pick}.md") if pick else None
    return days, pick, text, _read(memory_dir / HISTORY)


def _read(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_NOTE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


async def _form(request: web.Request) -> dict[str, str]:
    data = await request.post()
    return {k: v for k, v in data.items() if isinstance(v, str)}


def _line(form: dict[str, str]) -> int:
    v = form.get("line", "")
    if not (v.isascii() and v.isdigit()) or len(v) > 9:  # isdigit() accepts "²", int() not
        raise BadRequestError("line: expected a line number", field="line")
    return int(v)


async def memory(request: web.Request, deps: WebDeps, s: WebSession,
                 **extra: Any) -> web.Response:
    snap = await deps.memory.snapshot()
    doc = snap.doc
    days, pick, note, history = await asyncio.to_thread(
        _notes, deps.memory_dir, request.query.get("day"))
    keys = [item_key(it) for e in doc.entries for it in e.items]
    prov, changes = await request.app[SERVICES].store.read(
        lambda c: (memories.audit(c, keys), memories.changes(c)))
    entries = [{**e.as_dict(), "audit": [_audit(it, prov.get(item_key(it))) for it in e.items]}
               for e in doc.entries]
    edit = request.query.get("edit", "")
    return render(request, "memory.html", title="Memory", entries=entries,
                  version=snap.version, path=str(deps.memory.path), limit=deps.memory.max_entries,
                  problems=doc.problems, days=days, day=pick, note=note, history=history,
                  changes=changes,
                  edit=int(edit) if edit.isascii() and edit.isdigit() and len(edit) < 10 else None,
                  **extra)


def _audit(item: str, row: dict[str, Any] | None) -> dict[str, Any]:
    """One MEMORY.md item as the page shows it: its subject and dates, the turns behind
    it (links that open them) and what it replaced; an item written by hand has none."""
    if row is None:
        return {"item": item, "known": False}
    sources = [{"label": f"{s['agent']} · {PurePath(s.get('project') or '-').name} · "
                         f"{s['day']}",
                "url": session_url(s["agent"], s["session_id"],
                                   unit=s["unit_ids"][0] if s["unit_ids"] else None)}
               for s in row["sessions"]]
    return {"item": item, "known": True, "subject": row.get("subject"),
            "first_seen": row["first_seen"], "last_confirmed": row["last_confirmed"],
            "confirmations": row["confirmations"], "made_by": row["made_by"],
            "reasons": json.loads(row["reasons"] or "[]"), "sources": sources,
            "replaced": row["replaced"]}


async def add(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    form = await _form(request)
    content = form.get("content", "").strip()
    if not content:
        raise BadRequestError("content: write something to remember", field="content")
    r = await deps.memory.add(content, form.get("source", "").strip() or "manual")
    msg = (f"already there (line {r.line})" if r.duplicate else f"added as line {r.line}")
    return await memory(request, deps, s, notice=msg)


async def edit(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    """Replace one entry's items, keeping its date and source; refused (409) if the file
    changed since the page was rendered."""
    form = await _form(request)
    line = _line(form)
    snap = await deps.memory.snapshot()
    entry = snap.doc.entry_at(line)
    if entry is None:
        raise BadRequestError(f"line {line} is not an entry", field="line")
    items = split_items(form.get("content", ""))
    if not items:
        raise BadRequestError("content: an entry needs some text (delete it instead)",
                              field="content")
    lines = split_lines(snap.raw.decode("utf-8"))
    lines[line - 1] = format_entry(date.fromisoformat(entry.date), entry.source, items)
    await deps.memory.replace(format_lines(lines), form.get("version") or None)
    return await memory(request, deps, s, notice=f"line {line} saved")


async def delete(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    form = await _form(request)
    line = _line(form)
    await deps.memory.delete([line], form.get("version") or None)
    return await memory(request, deps, s, notice=f"line {line} deleted")


async def context(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    q = request.query
    form = {k: q.get(k, "") for k in ("prompt", "cwd", "agent", "session", "budget")}
    pack = None
    if form["prompt"].strip() or form["cwd"].strip() or form["session"].strip():
        budget = form["budget"].strip() or "2000"
        req = ContextRequest.model_validate({
            "query": form["prompt"].strip() or None, "cwd": form["cwd"].strip() or None,
            "agent": form["agent"].strip() or None, "session_id": form["session"].strip() or None,
            "budget_tokens": budget,
            "include": ["long_term", "session_summary", "recalled", "daily"]})
        pack = await deps.context.build(req)
    rows = await request.app[SERVICES].store.read(lambda c: sql.page_sessions(
        c, agent=None, project=None, since=None, until=None, limit=200, after=None))
    projects = sorted({r["project"] for r in rows if r["project"]})
    status = await request.app[SERVICES].status()
    served = {k: v for k, v in status.items() if "served" in k or k == "context"}
    return render(request, "context.html", title="Context preview", form=form, pack=pack,
                  projects=projects, served=served)
