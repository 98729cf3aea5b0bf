"""`Route`: one row of the HTTP surface's table (server/app.py `route_table`, which takes
web/routes.py ROUTES in): the method and path the router matches, the handler, what the
route's OpenAPI entry says, and which service it needs to be mounted at all."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from pydantic import BaseModel

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str  # "get", "post", "put", "delete"
    path: str  # aiohttp's pattern: `{id:.+}` where a session id may hold '/'
    handler: Handler
    summary: str | None = None  # the OpenAPI entry's; None: not in the document
    body: type[BaseModel] | None = None  # the JSON request body
    query: type[BaseModel] | None = None  # the query parameters
    response: type[BaseModel] | None = None  # the 200 reply
    needs: str | None = None  # the `Services` field without which it is not mounted

    @property
    def doc_path(self) -> str:
        """The path as OpenAPI writes it: `{id:.+}` is `{id}`."""
        return re.sub(r"\{(\w+):[^}]*\}", r"{\1}", self.path)

    def mount(self, app: web.Application) -> None:
        if self.method == "get":
            app.router.add_get(self.path, self.handler)  # and HEAD, as aiohttp does
        else:
            app.router.add_route(self.method.upper(), self.path, self.handler)
