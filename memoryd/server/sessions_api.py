"""Sessions: list (filters, keyset paging), show, messages, forget."""

from __future__ import annotations

import math
import sqlite3
from datetime import datetime
from typing import Any

from aiohttp import web

from memoryd.api import (
    Forgotten,
    MessagesPage,
    MessagesQuery,
    SessionDetail,
    SessionRef,
    SessionsPage,
    SessionsQuery,
)
from memoryd.errors import BadRequestError
from memoryd.http.services import SERVICES
from memoryd.store import sessions as sql

MAX_INT = (1 << 63) - 1  # SQLite's INTEGER


def resolve(conn: sqlite3.Connection, session_id: str, agent: str | None,
            machine: str | None = None) -> sqlite3.Row:
    """The session with this id, or the only one whose id starts with it; in a fleet,
    `machine` picks one of several machines' sessions of the same id."""
    return sql.resolve_session(conn, session_id, agent, machine=machine)


def parse_cursor(cursor: str) -> tuple[float, int]:
    """A `next_cursor` this API returned: "<last_ts>:<pk>"."""
    ts, _, pk = cursor.partition(":")
    try:
        after = (float(ts), int(pk))
    except ValueError:
        after = None
    if after is None or not math.isfinite(after[0]) or not 0 <= after[1] <= MAX_INT:
        raise BadRequestError(f"cursor: {cursor!r} is not a next_cursor this API returned",
                              field="cursor")
    return after


def epoch(value: datetime | None, field: str) -> float | None:
    if value is None:
        return None
    try:
        return value.timestamp()
    except (OverflowError, ValueError, OSError):
        raise BadRequestError(f"{field}: {value.isoformat()} is out of range",
                              field=field) from None


async def list_sessions(request: web.Request) -> web.Response:
    q = SessionsQuery.model_validate(dict(request.query))
    after = parse_cursor(q.cursor) if q.cursor else None
    since, until = epoch(q.since, "since"), epoch(q.until, "until")
    rows = await request.app[SERVICES].store.read(lambda c: sql.page_sessions(
        c, agent=q.agent, project=q.project, since=since, until=until, limit=q.limit,
        after=after))
    nxt = None
    if len(rows) == q.limit:
        last = rows[-1]
        nxt = f"{last['last_ts'] or 0}:{last['pk']}"
    return web.json_response(SessionsPage(sessions=rows, next_cursor=nxt).model_dump())


async def show_session(request: web.Request) -> web.Response:
    ref = SessionRef.model_validate(dict(request.query))
    sid = request.match_info["id"]

    def load(c: sqlite3.Connection) -> dict[str, Any]:
        row = resolve(c, sid, ref.agent, ref.machine)
        return {**dict(row), "roles": sql.role_counts(c, row["pk"]),
                "files": sql.session_files(c, row["pk"])}

    data = await request.app[SERVICES].store.read(load)
    return web.json_response(SessionDetail.model_validate(data).model_dump())


async def session_messages(request: web.Request) -> web.Response:
    q = MessagesQuery.model_validate(dict(request.query))
    sid = request.match_info["id"]

    def load(c: sqlite3.Connection) -> list[dict[str, Any]]:
        row = resolve(c, sid, q.agent, q.machine)
        return sql.messages_after(c, row["pk"], q.after_seq, q.limit)

    rows = await request.app[SERVICES].store.read(load)
    nxt = rows[-1]["seq"] if len(rows) == q.limit else None
    return web.json_response(MessagesPage(messages=rows, next_after_seq=nxt).model_dump())


async def forget_session(request: web.Request) -> web.Response:
    ref = SessionRef.model_validate(dict(request.query))
    sid = request.match_info["id"]
    services = request.app[SERVICES]

    def forget(c: sqlite3.Connection) -> dict[str, Any]:
        row = resolve(c, sid, ref.agent, ref.machine)
        n = sql.forget_session(c, row["pk"])
        return {"agent": row["agent"], "session_id": row["session_id"],
                "machine": row["machine"] or None, "units_deleted": n}

    data = await services.store.write(forget)
    for hook in services.on_forget:
        data.update(await hook(data["agent"], data["session_id"], data["machine"]))
    services.events.publish("session_forgotten", agent=data["agent"],
                            session_id=data["session_id"], machine=data["machine"])
    return web.json_response(Forgotten.model_validate(data).model_dump())
