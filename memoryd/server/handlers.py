"""Thin handlers: parse, call one service function, serialize."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from memoryd.api import BackupRequest, IngestRequest, SearchRequest, StatusQuery
from memoryd.errors import NotFoundError
from memoryd.http.json_io import json_body, json_reply, model_reply, parse_body
from memoryd.http.metrics import CONTENT_TYPE as METRICS_TYPE
from memoryd.http.services import SERVICES
from memoryd.recall import search as search_service
from memoryd.server.backup_dest import create_backup_file
from memoryd.status_text import render_status

HEARTBEAT_S = 15.0


async def health(request: web.Request) -> web.Response:
    s = request.app[SERVICES]
    return json_reply({"status": "ok", "version": s.version, "api": 1})


async def status(request: web.Request) -> web.Response:
    q = StatusQuery.model_validate(dict(request.query))
    data = await request.app[SERVICES].status()
    if q.format == "text":  # `memoryctl status`'s quick path: rendered here, no JSON
        return web.Response(text=render_status(data), content_type="text/plain",
                            charset="utf-8")
    return json_reply(data)


async def search(request: web.Request) -> web.Response:
    req = await parse_body(request, SearchRequest)
    services = request.app[SERVICES]
    resp = await search_service.search(services.store, req, services.archive_dir,
                                         services.embed)
    # pydantic's own encoder: a third of model_dump() + json.dumps' time for 15 results
    return model_reply(resp)


async def ingest(request: web.Request) -> web.Response:
    req = IngestRequest.model_validate(await json_body(request))
    services = request.app[SERVICES]
    if services.ingest is None:
        raise NotFoundError("ingest is not available here")
    resp = await services.ingest(req)
    return web.json_response(resp.model_dump())


async def backup(request: web.Request) -> web.Response:
    """A 0600 copy in a folder of the user's own: the rule is in server/backup_dest.py."""
    req = BackupRequest.model_validate(await json_body(request))
    services = request.app[SERVICES]
    dest = await asyncio.to_thread(create_backup_file, req.path, services.backup_roots)
    try:
        size = await services.store.backup(dest)
    except BaseException:
        await asyncio.to_thread(dest.unlink, missing_ok=True)
        raise
    return web.json_response({"path": str(dest), "bytes": size})


async def list_jobs(request: web.Request) -> web.Response:
    return web.json_response({"jobs": sorted(request.app[SERVICES].jobs)})


async def run_job(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    jobs = request.app[SERVICES].jobs
    fn = jobs.get(name)
    if fn is None:
        raise NotFoundError(f"no job {name!r}; jobs: {', '.join(sorted(jobs)) or 'none'}",
                            field="name")
    params = await json_body(request)
    events = request.app[SERVICES].events
    events.publish("job_started", job=name)
    try:
        result = await fn(params)
    finally:
        events.publish("job_finished", job=name)
    return web.json_response({"job": name, "result": result})


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: one `event:`/`data:` pair per activity, a comment line as
    heartbeat so proxies and clients notice a dead connection."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache"})
    await resp.prepare(request)
    try:
        async with request.app[SERVICES].events.subscribe() as queue:
            await resp.write(b": connected\n\n")
            while True:
                try:
                    ev = await asyncio.wait_for(queue.get(), HEARTBEAT_S)
                except TimeoutError:
                    await resp.write(b": heartbeat\n\n")
                    continue
                data = json.dumps(ev, ensure_ascii=False)
                await resp.write(f"event: {ev['event']}\ndata: {data}\n\n".encode())
    except ConnectionResetError:
        pass  # the client left: how every event stream ends, not an error
    return resp


async def metrics(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    services.metrics.observe(await services.status())
    return web.Response(body=services.metrics.render(),
                        headers={"Content-Type": METRICS_TYPE})
