"""Binding the application: the Unix socket (primary door, 0600 in a 0700 directory)
and loopback TCP."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import stat
from pathlib import Path

from aiohttp import web

from memoryd.errors import AlreadyRunningError, ConfigError
from memoryd.paths import check_socket_path


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
    except OSError as e:
        if e.errno in (errno.ECONNREFUSED, errno.ENOENT):
            path.unlink(missing_ok=True)  # stale: nobody listens
            return
        raise
    finally:
        s.close()
    raise AlreadyRunningError(f"another memoryd is listening on {path}")


async def start_unix(runner: web.AppRunner, path: Path) -> web.UnixSite:
    check_socket_path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
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
