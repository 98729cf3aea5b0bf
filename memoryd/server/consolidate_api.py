"""HTTP routes of consolidation and retention:

- `GET /v1/memory/why/{line}`: where a MEMORY.md entry came from (provenance);
- `GET /v1/daily`: the daily notes; `GET /v1/daily/{date}`: one of them;
- `GET /v1/archive`: the archive files; `POST /v1/archive/search`: search archived units;
  `POST /v1/archive/restore`: bring a session's units back into the store.

The jobs themselves run through `POST /v1/jobs/{consolidate|retention}/run`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from memoryd.errors import BadRequestError, NotFoundError
from memoryd.http.json_io import json_body
from memoryd.http.services import SERVICES, need
from memoryd.memory import daily


class ArchiveSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    q: str = Field(min_length=1, max_length=1000)
    max_results: int = Field(15, ge=1, le=500)
    agent: str | None = Field(None, max_length=100)


class ArchiveRestore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str = Field(min_length=1, max_length=1000)
    agent: str | None = Field(None, max_length=100)
    dry_run: bool = False


async def why(request: web.Request) -> web.Response:
    raw = request.match_info["line"]
    # ASCII digits only: isdigit() also accepts "²" and "①", which int() refuses
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        raise BadRequestError("line: expected a positive line number", field="line")
    return web.json_response(await need(request.app[SERVICES].consolidator).why(int(raw)))


async def list_daily(request: web.Request) -> web.Response:
    consolidator = need(request.app[SERVICES].consolidator)
    days = await asyncio.to_thread(daily.list_notes, consolidator.memory_dir)
    return web.json_response({"dates": days})


async def read_daily(request: web.Request) -> web.Response:
    day = request.match_info["date"]
    try:
        dt.date.fromisoformat(day)
    except ValueError:
        raise BadRequestError("date: expected YYYY-MM-DD", field="date") from None
    path = daily.note_path(need(request.app[SERVICES].consolidator).memory_dir, day)
    try:
        text = await asyncio.to_thread(path.read_text, encoding="utf-8")
    except FileNotFoundError:
        raise NotFoundError(f"no daily note for {day}", field="date") from None
    return web.json_response({"date": day, "path": str(path), "text": text})


async def archive_list(request: web.Request) -> web.Response:
    return web.json_response(await need(request.app[SERVICES].retention).archive_list())


async def archive_search(request: web.Request) -> web.Response:
    q = ArchiveSearch.model_validate(await json_body(request))
    retention = need(request.app[SERVICES].retention)
    return web.json_response(await retention.archive_search(q.q, q.max_results, q.agent))


async def archive_restore(request: web.Request) -> web.Response:
    q = ArchiveRestore.model_validate(await json_body(request))
    retention = need(request.app[SERVICES].retention)
    body: dict[str, Any] = await retention.restore(q.session_id, q.agent, dry_run=q.dry_run)
    return web.json_response(body)
