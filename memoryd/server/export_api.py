"""GET /v1/export: sessions as Markdown or JSONL, streamed."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from memoryd.http.services import SERVICES
from memoryd.server.sessions_api import resolve
from memoryd.store.export import export_sessions, select_sessions


class ExportQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str | None = Field(None, max_length=1024)
    project: str | None = Field(None, max_length=4096)
    agent: str | None = Field(None, max_length=100)
    machine: str | None = Field(None, max_length=200)  # with session_id, in a fleet
    since: datetime | None = None  # ISO-8601 or Unix seconds; naive = local time
    format: Literal["md", "jsonl"] = "md"


TYPES = {"md": "text/markdown", "jsonl": "application/x-ndjson"}


async def export(request: web.Request) -> web.StreamResponse:
    q = ExportQuery.model_validate(dict(request.query))
    store = request.app[SERVICES].store

    def pick(c: Any) -> list[dict[str, Any]]:
        if q.session_id:
            return [dict(resolve(c, q.session_id, q.agent, q.machine))]
        return select_sessions(c, agent=q.agent, project=q.project,
                               since=q.since.timestamp() if q.since else None)

    sessions = await store.read(pick)  # errors (unknown session) are raised before streaming
    resp = web.StreamResponse(headers={"Content-Type": f"{TYPES[q.format]}; charset=utf-8"})
    await resp.prepare(request)
    async for chunk in export_sessions(store, sessions, q.format):
        await resp.write(chunk.encode("utf-8"))
    await resp.write_eof()
    return resp
