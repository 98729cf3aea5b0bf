"""Access to the web page. The API's bearer token is not something a browser can send, so:

- `memoryctl open` asks the daemon (over the socket) to mint a one-time login link,
  valid for `LINK_TTL_S`;
- visiting it once sets an HttpOnly, SameSite=Strict session cookie for the page;
- every state-changing request must come from our own Origin and carry the session's
  CSRF token; the Host check of the API's middleware holds for the page too.

Everything lives in memory: a restart of the daemon logs the browser out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

LINK_TTL_S = 120.0
SESSION_TTL_S = 12 * 3600.0
MAX_SESSIONS = 64
COOKIE = "memoryd_web"
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class WebSession:
    csrf: str
    expires: float


class Access:
    """One-time login links and the browser sessions they open (keyed by a hash of
    the secret, so a dump of this object holds nothing usable)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._links: dict[str, float] = {}
        self._sessions: dict[str, WebSession] = {}

    def mint_link(self) -> str:
        self._expire()
        token = secrets.token_urlsafe(32)
        self._links[_digest(token)] = self.clock() + LINK_TTL_S
        return token

    def redeem(self, token: str) -> str | None:
        """The link's token → a new session id, once; None if unknown, used or expired."""
        self._expire()
        if self._links.pop(_digest(token), None) is None:
            return None
        sid = secrets.token_urlsafe(32)
        if len(self._sessions) >= MAX_SESSIONS:  # drop the oldest
            oldest = min(self._sessions, key=lambda k: self._sessions[k].expires)
            del self._sessions[oldest]
        self._sessions[_digest(sid)] = WebSession(secrets.token_urlsafe(24),
                                                  self.clock() + SESSION_TTL_S)
        return sid

    def session(self, request: web.Request) -> WebSession | None:
        sid = request.cookies.get(COOKIE)
        if not sid:
            return None
        s = self._sessions.get(_digest(sid))
        if s is None or s.expires < self.clock():
            return None
        return s

    def logout(self, request: web.Request) -> None:
        sid = request.cookies.get(COOKIE)
        if sid:
            self._sessions.pop(_digest(sid), None)

    def _expire(self) -> None:
        now = self.clock()
        self._links = {k: t for k, t in self._links.items() if t >= now}
        self._sessions = {k: s for k, s in self._sessions.items() if s.expires >= now}


def set_cookie(resp: web.StreamResponse, sid: str) -> None:
    resp.set_cookie(COOKIE, sid, path="/", httponly=True, samesite="Strict",
                    max_age=int(SESSION_TTL_S))


def same_origin(request: web.Request) -> bool:
    """A state-changing request must name our own origin (Origin, or Referer when a
    browser leaves Origin out). Host is already a loopback name (host_middleware)."""
    host = request.headers.get("Host", "")
    ours = {f"http://{host}", f"https://{host}"}
    origin = request.headers.get("Origin")
    if origin is not None:
        return origin in ours
    referer = request.headers.get("Referer", "")
    return any(referer == o or referer.startswith(o + "/") for o in ours)


async def csrf_ok(request: web.Request, session: WebSession) -> bool:
    got = request.headers.get(CSRF_HEADER)
    if got is None and request.content_type in ("application/x-www-form-urlencoded",
                                                  "multipart/form-data"):
        got = (await request.post()).get(CSRF_FIELD)
    return isinstance(got, str) and hmac.compare_digest(got.encode(), session.csrf.encode())


SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; frame-ancestors 'none'; "
                               "form-action 'self'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
