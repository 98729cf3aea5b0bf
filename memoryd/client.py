"""A small client for the daemon's Unix socket, on the standard library alone:
hooks call memoryctl on every prompt, so this must import in milliseconds.

Before a request leaves, the client asks the kernel who serves the socket (SO_PEERCRED /
LOCAL_PEERCRED) and refuses another user's: in a shared folder anyone could have bound the
path first, then read the query and answer what they like."""

from __future__ import annotations

import errno
import os
import sys

# Only errno, os and sys at import (Python's start loads the last two): `memoryctl context`
# and the hook (memoryd.cli.memoryctl) talk through `open_unix` and `_exchange` on a raw
# `_socket` and need neither json (which imports re), socket (enum), pathlib nor urllib;
# each is imported where it is first used.
TYPE_CHECKING = False  # typing costs ~6 ms to import; annotations are strings here
if TYPE_CHECKING:
    import socket
    from pathlib import Path
    from typing import Any


class DaemonNotRunning(Exception):
    """No socket: the daemon is not running."""

    def __init__(self, path: Path, stale: bool = False) -> None:
        self.path = path
        self.stale = stale
        if stale:
            msg = (f"a socket exists at {path} but nothing is listening (stale: memoryd "
                   "died?). Start memoryd again; it removes the stale socket.")
        else:
            msg = (f"memoryd is not running (no socket at {path}). Start it with `memoryd` "
                   "or `systemctl --user start memoryd`.")
        super().__init__(msg)


class ForeignSocketError(ConnectionError):
    """The socket is served by a process of another user: sending it a request would hand
    them the query, and its answer could be anything they chose."""

    def __init__(self, path: str, uid: int) -> None:
        self.path, self.uid = path, uid
        super().__init__(
            f"the socket at {path} is served by {user_name(uid)}, not by you "
            f"({user_name(os.geteuid())}): refusing to talk to it. Another user may have "
            "bound that path before memoryd did; use a socket in your own runtime "
            "directory (the default) or a folder only you can write")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


def quote(s: str, safe: str = "/") -> str:
    from urllib.parse import quote as q

    return q(s, safe=safe)


def user_name(uid: int) -> str:
    """"user 'alice' (uid 1000)", or "uid 1000" when the system has no name for it."""
    import pwd

    try:
        return f"user {pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def peer_credentials(sock: Any) -> tuple[int, int | None] | None:
    """(uid, pid or None) of the process at the other end of a connected Unix socket (for
    a client, the one that bound and listens), as the kernel recorded it: SO_PEERCRED on
    Linux, LOCAL_PEERCRED on macOS and the BSDs. None where the system cannot say."""
    import _socket

    try:
        if sys.platform.startswith("linux"):  # struct ucred {pid_t; uid_t; gid_t}
            raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
            return (int.from_bytes(raw[4:8], sys.byteorder),
                    int.from_bytes(raw[0:4], sys.byteorder, signed=True))
        if sys.platform == "darwin" or "bsd" in sys.platform:
            # SOL_LOCAL (0), LOCAL_PEERCRED (1): struct xucred {u_int version; uid_t uid;
            # short ngroups; gid_t groups[16]} (getpeereid(3) reads the same)
            raw = sock.getsockopt(getattr(_socket, "SOL_LOCAL", 0),
                                  getattr(_socket, "LOCAL_PEERCRED", 1), 76)
            return int.from_bytes(raw[4:8], sys.byteorder), None
    except OSError:
        return None
    return None


def _check_peer(sock: Any, path: str) -> None:
    """Refuse a socket another user serves (ForeignSocketError). Where the system cannot
    name the peer, the socket file's owner stands in for it."""
    creds = peer_credentials(sock)
    if creds is not None:
        uid = creds[0]
    else:
        try:
            uid = os.stat(path).st_uid
        except OSError:
            return
    if uid != os.geteuid():
        raise ForeignSocketError(path, uid)


def open_unix(path: str, timeout: float | None) -> Any:
    """A connected `_socket.socket` to `path`, after checking who serves it.

    With a timeout the socket is non-blocking, and connect() to a listener whose queue is
    full (a burst of more than its backlog, 128 for memoryd) fails at once with EAGAIN
    instead of waiting; that is retried, with a short growing pause, until `timeout`.
    Other errors (ENOENT, ECONNREFUSED, ...) are raised as they are."""
    import _socket

    deadline: float | None = None
    pause = 0.002
    while True:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(path)
            _check_peer(s, path)
            return s
        except BlockingIOError:  # EAGAIN: the listen queue is full
            s.close()
            import time

            now = time.monotonic()
            if deadline is None:
                deadline = now + (timeout or 0.0)
            if now >= deadline:
                raise TimeoutError(
                    errno.EAGAIN, f"memoryd at {path} is busy: its queue of new connections "
                    f"stayed full for {timeout or 0:g}s") from None
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, 0.05)
        except BaseException:
            s.close()
            raise


class _Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


def _exchange(sock: socket.socket, method: str, path: str, headers: dict[str, str],
              payload: bytes | None) -> _Response:
    """One HTTP/1.1 request with `Connection: close`, read to EOF. Enough for our own
    server, and far cheaper to import than http.client (which pulls in ssl and email)."""
    head = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close",
            "Accept: application/json"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    if payload is not None:
        head.append(f"Content-Length: {len(payload)}")
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (payload or b""))
    chunks = []
    while data := sock.recv(65536):
        chunks.append(data)
    raw = b"".join(chunks)
    header_blob, sep, body = raw.partition(b"\r\n\r\n")
    lines = header_blob.decode("latin-1").split("\r\n")
    if not sep or not lines[0].startswith("HTTP/"):
        raise ConnectionError("malformed HTTP response from memoryd")
    status = int(lines[0].split(" ", 2)[1])
    hdrs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    return _Response(status, hdrs, body)


def _dechunk(data: bytes) -> bytes:
    out, pos = [], 0
    while True:
        nl = data.index(b"\r\n", pos)
        size = int(data[pos:nl].split(b";")[0], 16)
        if size == 0:
            return b"".join(out)
        out.append(data[nl + 2 : nl + 2 + size])
        pos = nl + 2 + size + 2


class MemorydClient:
    """Talks to the Unix socket, or to loopback TCP when `tcp=(host, port)` is given
    (then the bearer token from the daemon's token file is sent)."""

    def __init__(self, socket_path: Path, timeout: float = 30.0,
                 tcp: tuple[str, int] | None = None, token: str | None = None) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.tcp = tcp
        self.token = token

    def _connect(self) -> socket.socket:
        if self.tcp is not None:
            import socket

            return socket.create_connection(self.tcp, timeout=self.timeout)
        try:
            return open_unix(str(self.socket_path), self.timeout)  # type: ignore[no-any-return]
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                raise DaemonNotRunning(self.socket_path) from None
            if e.errno == errno.ECONNREFUSED:
                raise DaemonNotRunning(self.socket_path, stale=True) from None
            raise

    def request(self, method: str, path: str, body: Any = None,
                query: dict[str, Any] | None = None) -> Any:
        import json

        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                from urllib.parse import urlencode

                path += "?" + urlencode(q)
        payload = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        if self.token and self.tcp is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        sock = self._connect()
        try:
            resp = _exchange(sock, method, path, headers, payload)
        finally:
            sock.close()
        ctype = resp.headers.get("content-type", "")
        raw = resp.body
        is_json = ctype.split(";")[0].strip() == "application/json"  # not x-ndjson exports
        data = json.loads(raw) if raw and is_json else raw.decode("utf-8", "replace")
        if resp.status >= 400:
            err = data.get("error", {}) if isinstance(data, dict) else {}
            raise ApiError(resp.status, err.get("code", "http_error"),
                           err.get("message", str(data)), err.get("field"))
        return data

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/v1/health")

    def status(self) -> dict[str, Any]:
        return self.request("GET", "/v1/status")

    def search(self, **body: Any) -> dict[str, Any]:
        return self.request("POST", "/v1/search", {k: v for k, v in body.items() if v is not None})

    def sessions(self, **query: Any) -> dict[str, Any]:
        return self.request("GET", "/v1/sessions", query=query)

    def session(self, session_id: str, agent: str | None = None,
                machine: str | None = None) -> dict[str, Any]:
        return self.request("GET", f"/v1/sessions/{quote(session_id)}",
                            query={"agent": agent, "machine": machine})

    def messages(self, session_id: str, **query: Any) -> dict[str, Any]:
        return self.request("GET", f"/v1/sessions/{quote(session_id)}/messages", query=query)

    def forget(self, session_id: str, agent: str | None = None,
               machine: str | None = None) -> dict[str, Any]:
        return self.request("DELETE", f"/v1/sessions/{quote(session_id)}",
                            query={"agent": agent, "machine": machine})

    def run_job(self, name: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.request("POST", f"/v1/jobs/{quote(name, safe='')}/run", params or {})

    def ingest(self, path: str, *, agent: str = "auto", wait: bool = False) -> dict[str, Any]:
        return self.request("POST", "/v1/ingest", {"path": path, "agent": agent, "wait": wait})

    def backup(self, path: str) -> dict[str, Any]:
        return self.request("POST", "/v1/backup", {"path": path})

    def memory(self) -> dict[str, Any]:
        return self.request("GET", "/v1/memory")

    def memory_replace(self, content: str, version: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"content": content}
        if version:
            body["version"] = version
        return self.request("PUT", "/v1/memory", body)

    def memory_add(self, content: str, source: str = "manual") -> dict[str, Any]:
        return self.request("POST", "/v1/memory/entries", {"content": content, "source": source})

    def memory_delete(self, lines: list[int], version: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"lines": lines}
        if version:
            body["version"] = version
        return self.request("POST", "/v1/memory/entries/delete", body)

    def memory_recent(self, count: int = 10) -> dict[str, Any]:
        return self.request("GET", "/v1/memory/recent", query={"count": count})

    def memory_stats(self) -> dict[str, Any]:
        return self.request("GET", "/v1/memory/stats")

    def memory_search(self, keywords: list[str], match_mode: str = "or",
                      max_results: int = 15) -> dict[str, Any]:
        return self.request("POST", "/v1/memory/search", {
            "keywords": keywords, "match_mode": match_mode, "max_results": max_results})
