"""HTTP routes of the summaries service:

- `GET /v1/sessions/{id}/summary[?agent=&recent=]`: the rolling summary, what it
  covers, what made it, and the messages after it;
- `POST /v1/sessions/{id}/summarize[?agent=&wait=true]`: force a summary now.

Session ids may contain `/` (a transcript's path under its root), hence `{id:.+}`
anchored by the action suffix. Register these before any catch-all
`/v1/sessions/{id:.+}` route.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from memoryd.http.services import SERVICES, need


class SummaryQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: str | None = Field(None, max_length=100)
    machine: str | None = Field(None, max_length=200)  # a fleet: which machine's session
    recent: int = Field(100, ge=0, le=1000)


class SummarizeQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: str | None = Field(None, max_length=100)
    machine: str | None = Field(None, max_length=200)
    wait: bool = False
    timeout: float = Field(300.0, gt=0, le=3600)
    to_memory: bool = False  # then wait, and send the summary through MEMORY.md admission


class RecentMessage(BaseModel):
    seq: int
    role: str
    kind: str
    content: str
    ts: float | None
    tool_name: str | None
    one_liner: str | None


class SessionSummary(BaseModel):
    agent: str
    session_id: str
    machine: str | None = None
    summary: str | None = Field(description="the rolling summary; null before the first")
    covers_upto_seq: int = Field(description="the summary covers the messages up to this seq")
    made_by: str | None = Field(description="`extractive` or the model's litellm route")
    prompt_version: str | None
    updated_at: float | None
    recent_total: int = Field(description="messages after covers_upto_seq")
    recent: list[RecentMessage] = Field(description="the latest of them (`recent` of them)")
    job_id: int | None = None
    state: str | None = None
    result: dict[str, Any] | None = None
    to_memory: dict[str, Any] | None = Field(
        None, description="with to_memory=true: what admission added, confirmed, "
        "superseded, dropped, and why")


async def get_summary(request: web.Request) -> web.Response:
    q = SummaryQuery.model_validate(dict(request.query))
    service = need(request.app[SERVICES].summaries)
    body = await service.get_summary(request.match_info["id"], q.agent, q.recent,
                                     machine=q.machine)
    return web.json_response(body)


async def summarize(request: web.Request) -> web.Response:
    q = SummarizeQuery.model_validate(dict(request.query))
    service = need(request.app[SERVICES].summaries)
    to_memory = request.app[SERVICES].to_memory
    wait = q.wait or (q.to_memory and to_memory is not None)
    body = await service.summarize(request.match_info["id"], q.agent, wait=wait,
                                   timeout=q.timeout, machine=q.machine)
    if q.to_memory and to_memory is not None:
        body["to_memory"] = (await to_memory(body["session_id"], body["agent"],
                                             body.get("machine")))["memory"]
    return web.json_response(body, status=200 if wait else 202)
