"""Binding the application: the Unix socket (primary door, 0600 in a 0700 directory)
and loopback TCP."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import os
import socket
import stat
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from memoryd.client import peer_credentials, user_name
from memoryd.errors import AlreadyRunningError, ConfigError
from memoryd.paths import UnsafeDirectoryError, check_socket_path, mkdir_private

log = logging.getLogger(__name__)

# Slowloris: a connection must finish its first request's line and headers within
# HEADER_TIMEOUT; an idle keep-alive connection, or one half-way through sending its next
# request's headers, is closed after IDLE_TIMEOUT (aiohttp's keepalive_timeout, which
# closes a connection whose handler still waits for a complete request); a request body
# must arrive within app.BODY_TIMEOUT.
HEADER_TIMEOUT = 10.0
IDLE_TIMEOUT = 30.0


class GuardedRunner(web.AppRunner):
    """An AppRunner whose connections get a deadline for their first request's headers
    (aiohttp itself has none: a client that sends half a request line and stops holds the
    connection forever)."""

    def __init__(self, app: web.Application, *, header_timeout: float = HEADER_TIMEOUT,
                 idle_timeout: float = IDLE_TIMEOUT, **kwargs: Any) -> None:
        # lingering_time: how long a closing connection may still send an unread body
        # (aiohttp's default, 10 s, would let a slow body hold it that much longer)
        kwargs.setdefault("lingering_time", 1.0)
        # no SO_KEEPALIVE per connection (aiohttp sets it through a socket object uvloop
        # builds for it, a few system calls each time): a Unix socket ignores it, and its
        # first probe comes after 2 h idle, when IDLE_TIMEOUT has long closed an idle
        # connection and an event stream's heartbeat (15 s) has found a dead peer
        kwargs.setdefault("tcp_keepalive", False)
        super().__init__(app, handle_signals=False, keepalive_timeout=idle_timeout, **kwargs)
        self.header_timeout = header_timeout
        self.timed_out = 0  # connections closed for sending their headers too slowly

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        self._guard(server)
        return server

    def _guard(self, server: web.Server) -> None:
        """Arm a timer when a connection opens; the first parsed request (aiohttp calls
        the request factory once the headers are complete) or the connection's end
        disarms it; if it fires, the connection is closed."""
        loop = asyncio.get_running_loop()
        timers: dict[RequestHandler, asyncio.TimerHandle] = {}
        made, lost, factory = server.connection_made, server.connection_lost, \
            server.request_factory

        def expire(handler: RequestHandler) -> None:
            timers.pop(handler, None)
            self.timed_out += 1
            log.debug("closing a connection that sent no complete request within %.0fs",
                      self.header_timeout)
            handler.force_close()

        def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
            made(handler, transport)
            timers[handler] = loop.call_later(self.header_timeout, expire, handler)

        def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
            if (t := timers.pop(handler, None)) is not None:
                t.cancel()
            lost(handler, exc)

        def request_factory(message: Any, payload: Any, protocol: RequestHandler,
                            *args: Any) -> web.BaseRequest:
            if (t := timers.pop(protocol, None)) is not None:
                t.cancel()
            return factory(message, payload, protocol, *args)

        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]
        server.request_factory = request_factory


def probe_socket(path: Path) -> None:
    """Refuse a live socket; remove a stale one; refuse a path that is not a socket."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise AlreadyRunningError(f"{path} exists and is not a socket; refusing to replace it")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(str(path))
        creds = peer_credentials(s)
    except OSError as e:
        if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
            path.unlink(missing_ok=True)  # stale: nobody listens
            return
        raise
    finally:
        s.close()
    uid, pid = creds if creds is not None else (st.st_uid, None)
    if uid != os.geteuid():
        raise AlreadyRunningError(
            f"{path} is served by {user_name(uid)}" + (f", pid {pid}" if pid else "")
            + ", another user: memoryd will not replace it. Use a socket path of your own "
            "(--socket, or the default in your runtime directory)")
    raise AlreadyRunningError(f"another memoryd is listening on {path}"
                              + (f" (pid {pid}, {user_name(uid)})" if pid else ""))


def check_socket_dir(d: Path) -> None:
    """Refuse a folder for the socket where someone else could swap it for theirs: one
    another user owns (root aside), or one others may write that is not sticky. A sticky
    shared folder (/tmp) is allowed: no one else can remove memoryd's socket from it, and
    the client checks who serves the socket it reaches (memoryd.client.open_unix)."""
    st = d.stat()
    if st.st_uid not in (os.geteuid(), 0):
        raise UnsafeDirectoryError(f"the socket's folder {d} belongs to {user_name(st.st_uid)}"
                                   ", who could replace memoryd's socket with their own: "
                                   "choose a folder of your own")
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise UnsafeDirectoryError(f"the socket's folder {d} is writable by others (mode "
                                   f"{st.st_mode & 0o7777:04o}), who could replace memoryd's "
                                   "socket with their own: choose a folder of your own, or "
                                   "make it sticky (chmod +t)")


async def start_unix(runner: web.AppRunner, path: Path) -> web.UnixSite:
    check_socket_path(path)
    # Directories it creates are private; one that exists keeps its mode (memoryd's own
    # runtime dir was tightened by Paths.ensure; a chosen /tmp must stay everyone's).
    mkdir_private(path.parent)
    check_socket_dir(path.parent)
    probe_socket(path)
    old = os.umask(0o177)
    try:
        site = web.UnixSite(runner, str(path))
        await site.start()
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    return site


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def start_tcp(runner: web.AppRunner, host: str, port: int, *,
                    allow_non_loopback: bool) -> tuple[web.TCPSite, int]:
    if not is_loopback(host) and not allow_non_loopback:
        raise ConfigError(f"server.tcp_host = {host!r} is not a loopback address; set "
                          "server.allow_non_loopback = true to bind it", field="server.tcp_host")
    site = web.TCPSite(runner, host, port, reuse_address=True)
    before = runner.addresses
    await site.start()
    # the runner's addresses are every site's bound socket names; ours is the new one
    new = [a for a in runner.addresses if isinstance(a, tuple) and a not in before]
    return site, (new[0][1] if new else port)
