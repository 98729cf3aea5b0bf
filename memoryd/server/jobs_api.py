"""The job queue as users see it:

- `GET /v1/jobs/queue[?state=&kind=&limit=]`: pending, running and failed jobs (and the
  latest done ones) with their reasons and errors, and the counts;
- `GET /v1/jobs/{id}[?wait=true&timeout=]`: one job; with wait, once it is done or failed.

A job's target `session:<pk>` is shown with the session's agent and id.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from memoryd.errors import NotFoundError
from memoryd.http.json_io import error_body
from memoryd.http.services import SERVICES, need
from memoryd.store.jobs import JobRow, get_job, job_counts, list_jobs


class QueueQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: Literal["pending", "running", "done", "failed"] | None = None
    kind: str | None = Field(None, max_length=100)
    limit: int = Field(50, ge=1, le=1000)
    done: int = Field(5, ge=0, le=1000, description="without state: the latest done jobs too")


class JobQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    wait: bool = False
    timeout: float = Field(300.0, gt=0, le=3600)


def _describe(conn: sqlite3.Connection, jobs: list[JobRow]) -> list[dict[str, Any]]:
    pks = {int(j.target.split(":", 1)[1]) for j in jobs
           if j.target.startswith("session:") and j.target[8:].isdigit()}
    names = {}
    if pks:
        marks = ",".join("?" * len(pks))
        names = {r[0]: (r[1], r[2]) for r in conn.execute(
            f"SELECT id, agent, session_id FROM sessions WHERE id IN ({marks})", list(pks))}
    out = []
    for j in jobs:
        d = j.as_dict()
        if j.target.startswith("session:") and j.target[8:].isdigit():
            agent, sid = names.get(int(j.target[8:]), (None, None))
            d["agent"], d["session_id"] = agent, sid
        out.append(d)
    return out


async def list_queue(request: web.Request) -> web.Response:
    q = QueueQuery.model_validate(dict(request.query))

    def read(c: sqlite3.Connection) -> dict[str, Any]:
        if q.state is not None:
            rows = list_jobs(c, state=q.state, kind=q.kind, limit=q.limit)
        else:
            rows = [j for s in ("running", "pending", "failed")
                    for j in list_jobs(c, state=s, kind=q.kind, limit=q.limit)]
            rows += list_jobs(c, state="done", kind=q.kind, limit=q.done) if q.done else []
        return {"jobs": _describe(c, rows), "counts": job_counts(c)}

    return web.json_response(await request.app[SERVICES].store.read(read))


async def one_job(request: web.Request) -> web.Response:
    q = JobQuery.model_validate(dict(request.query))
    job_id = int(request.match_info["id"])
    store = request.app[SERVICES].store
    job = await store.read(lambda c: get_job(c, job_id))
    if job is None:
        raise NotFoundError(f"no job #{job_id} (finished jobs are forgotten after a week)",
                            field="id")
    if q.wait:
        queue = need(request.app[SERVICES].queue)
        job = await queue.wait(job_id, q.timeout)  # TimeoutError -> 504 below
    return web.json_response((await store.read(lambda c: _describe(c, [job])))[0])


async def one_job_safe(request: web.Request) -> web.Response:
    try:
        return await one_job(request)
    except TimeoutError:
        return web.json_response(error_body(
            "timeout", "the job is still running; its result is kept when it is done"),
            status=504)
