"""The user's history, readable without memoryd: sessions as Markdown (one heading per
session, its summary, then every message) or JSONL (one message a line, each carrying
its session's agent, id and project). Sessions are chosen by id (or unique prefix),
project, agent and/or start time; they are written a page at a time."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import AsyncIterator
from typing import Any

from memoryd.store import Store
from memoryd.store.sessions import messages_after, page_sessions

PAGE = 500


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(ts)) if ts else "time unknown"


def session_header_md(s: dict[str, Any]) -> str:
    lines = [f"# {s['title'] or s['session_id']}", "",
             f"- agent: {s['agent']}", f"- session: {s['session_id']}",
             f"- project: {s['project'] or '-'}",
             f"- time: {_when(s['first_ts'])} → {_when(s['last_ts'])}",
             f"- messages: {s['units']}", ""]
    if s.get("summary"):
        lines += ["## Summary", "", s["summary"].strip(), ""]
    lines += ["## Messages", ""]
    return "\n".join(lines) + "\n"


def message_md(m: dict[str, Any]) -> str:
    who = m["role"] + (f" · {m['tool_name']}" if m.get("tool_name") else "") + (
        f" ({m['kind']})" if m["kind"] != "message" else "")
    return f"**{who}** · {_when(m['ts'])} · #{m['seq']}\n\n{m['content'].rstrip()}\n\n"


def message_jsonl(s: dict[str, Any], m: dict[str, Any]) -> str:
    row = {"agent": s["agent"], "session_id": s["session_id"], "project": s["project"],
           "title": s["title"], "seq": m["seq"], "turn": m["turn"], "role": m["role"],
           "kind": m["kind"], "content": m["content"], "tool_name": m["tool_name"],
           "ts": m["ts"], "record_id": m["record_id"]}
    return json.dumps(row, ensure_ascii=False) + "\n"


async def export_sessions(store: Store, sessions: list[dict[str, Any]],
                          fmt: str) -> AsyncIterator[str]:
    for s in sessions:
        if fmt == "md":
            yield session_header_md(s)
        after = 0
        while True:
            page = await store.read(lambda c, a=after, pk=s["pk"]: messages_after(c, pk, a, PAGE))
            for m in page:
                yield message_md(m) if fmt == "md" else message_jsonl(s, m)
            if len(page) < PAGE:
                break
            after = page[-1]["seq"]


def select_sessions(conn: sqlite3.Connection, *, agent: str | None, project: str | None,
                    since: float | None, limit: int = 100_000) -> list[dict[str, Any]]:
    """Oldest first, so an export reads as a history."""
    rows = page_sessions(conn, agent=agent, project=project, since=since, until=None,
                         limit=limit, after=None)
    if rows:
        marks = ",".join("?" * len(rows))
        summaries = {r[0]: r[1] for r in conn.execute(
            f"SELECT id, summary FROM sessions WHERE id IN ({marks})", [r["pk"] for r in rows])}
        for r in rows:
            r["summary"] = summaries.get(r["pk"])
    return sorted(rows, key=lambda r: (r["first_ts"] or 0, r["pk"]))
