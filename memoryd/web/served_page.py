"""The served-context log's page (`/served`): what each agent was given, when, for which
prompt, and how many tokens it took, newest first; linked from the overview's chart of
context served per day. Read from the store (memoryd.store.served) as `GET
/v1/context/log` reads it."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from memoryd.errors import BadRequestError
from memoryd.http.services import SERVICES
from memoryd.store.served import daily_totals, list_served
from memoryd.web.auth import WebSession
from memoryd.web.deps import WebDeps
from memoryd.web.page import render
from memoryd.web.pages import session_url

LAST = 100
MAX_LAST = 1000


async def served(request: web.Request, deps: WebDeps, s: WebSession) -> web.Response:
    q = request.query
    agent = q.get("agent", "").strip() or None
    raw = q.get("last", "") or str(LAST)
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LAST:
        raise BadRequestError(f"last: expected 1 to {MAX_LAST}", field="last")
    last = int(raw)

    def read(c: Any) -> dict[str, Any]:
        return {"entries": list_served(c, agent=agent, last=last),
                "daily": daily_totals(c, days=30, agent=agent)}

    data = await request.app[SERVICES].store.read(read)
    entries = [_entry(e) for e in reversed(data["entries"])]
    return render(request, "served.html", title="Context served", entries=entries,
                  daily=data["daily"], agent=agent or "", last=last)


def _entry(e: dict[str, Any]) -> dict[str, Any]:
    """One request as the page shows it: each item named, a recalled turn linked."""
    items = []
    for it in e["items"]:
        kind, _, ref = str(it.get("id", "")).partition(":")
        url = None
        if kind == "unit" and it.get("session_id") and e.get("agent") and ref.isdigit():
            url = session_url(e["agent"], it["session_id"], unit=int(ref))
        elif kind == "line":
            url = f"/memory#line-{ref}"
        label = {"unit": "turn", "line": "MEMORY.md line", "upto": "session summary",
                 "day": "daily note"}.get(kind, kind)
        items.append({"section": it.get("section"), "label": f"{label} {ref}".strip(),
                      "tokens": it.get("tokens", 0), "url": url})
    return {**e, "items": items,
            "session_url": (session_url(e["agent"], e["session_id"])
                            if e.get("agent") and e.get("session_id") else None)}
