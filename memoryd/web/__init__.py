"""The web page: server-rendered HTML on the daemon's loopback TCP site at `/`.

`routes(WebDeps(...))` is added to `make_app(..., extra_routes=[...])` by daemon.py. The
pages call the same service functions as the API handlers (search, sessions, summaries,
the memory file, the context builder); nothing here has its own data path.
"""

from __future__ import annotations

from memoryd.web.routes import WebDeps, routes

__all__ = ["WebDeps", "routes"]
