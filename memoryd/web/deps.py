"""`WebDeps`: what the web page needs beyond the API's services (the summaries, the memory
file, the context builder, the TCP port for login links, the page's logins) and its
templates and static files, loaded on the first visit. The daemon builds it and hands it to
the app as `Services.web`; every page module reads it through `web_deps(request)`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from memoryd.http.services import SERVICES, need
from memoryd.web import auth

if TYPE_CHECKING:
    import jinja2

    from memoryd.memory import MemoryFile
    from memoryd.recall.context import ContextBuilder
    from memoryd.summarize.service import Summaries

STATIC = {"htmx.min.js": "application/javascript", "style.css": "text/css",
          "htmx.LICENSE": "text/plain", "live.js": "application/javascript"}
TEMPLATES = ("base.html", "macros.html", "login.html", "error.html", "overview.html", "search.html",
             "sessions.html", "session.html", "forget.html", "memory.html", "context.html",
             "served.html", "timeline.html")


@dataclass
class WebDeps:
    summaries: Summaries
    memory: MemoryFile
    context: ContextBuilder
    memory_dir: Path
    tcp_port: Callable[[], int | None]
    access: auth.Access = field(default_factory=auth.Access)
    # templates and static files load on the first request (in a thread), so the page
    # costs the daemon's start nothing
    env: jinja2.Environment | None = None
    static: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    _loading: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def ready(self) -> None:
        if self.env is not None:
            return
        async with self._loading:
            if self.env is None:
                await asyncio.to_thread(_load, self)


def web_deps(request: web.Request) -> WebDeps:
    """The page's dependencies: its routes are mounted only when the daemon gave them."""
    return need(request.app[SERVICES].web)


def _load(deps: WebDeps) -> None:
    from memoryd.web.render import make_env  # jinja2: imported by the first visit only

    base = resources.files("memoryd.web") / "static"
    for name, ctype in STATIC.items():
        deps.static[name] = ((base / name).read_bytes(), ctype)
    env = make_env()
    for name in TEMPLATES:
        env.get_template(name)  # parse now, not on the loop at the first visit
    deps.env = env
