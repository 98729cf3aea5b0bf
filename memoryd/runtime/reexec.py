"""Re-executing the daemon in place once it rests after a big backlog, so its memory
rests as a restarted daemon's does.

A daemon that stored a backlog itself (a first start on a long history) rests 10-15 MB
above the same daemon restarted on the same store, whatever is tuned: glibc's main heap
keeps live blocks a page apart across the span the backlog grew it to, and only a new
process image gives that back (bench/README, "idle RSS after a self-backfill", parts 1-3).
So once such a daemon rests, it replaces its own image with a fresh one (`os.execv` of
the same interpreter and argv): the same PID, so systemd and launchd keep tracking it.

The listening sockets are handed over as inherited descriptors, named in `ENV`: a client
that connects meanwhile waits in the socket's backlog and is answered by the new image.
The lock file's descriptor goes along too (its `flock` is never let go). What the new
image needs from the old one (the count of re-execs, the last one's time, RSS and pause)
travels in the same variable, which the new image removes from its environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import stat
import sys
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from aiohttp import web

from memoryd.runtime import sdnotify
from memoryd.runtime.idle_release import rss_mb

log = logging.getLogger(__name__)

ENV = "MEMORYD_REEXEC_HANDOVER"
DRAIN_S = 0.25  # the connections accepted before a re-exec send their request meanwhile
HELD = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
"""Signals held across the exec (`hold_signals`): between the old image's stop and the new
image's handlers (its interpreter's start, ~0.5 s) a stop or a reload asked for reaches
the new image instead of killing the process with the signal's default action."""


@dataclass
class Handover:
    """What one image passes to the next: descriptors and the re-execs' record."""

    unix: list[int] = field(default_factory=list)  # listening Unix sockets
    tcp: list[int] = field(default_factory=list)  # listening TCP sockets
    lock: int | None = None  # the lock file, still locked
    reexecs: int = 0  # re-execs of this daemon so far (this one included)
    at: float | None = None  # wall clock when the old image began to stop
    stopped_at: float | None = None  # wall clock when it had stopped, just before execv
    rss_mb: float | None = None  # the old image's RSS when it began
    units: int = 0  # units the old image had stored since it started
    pause_ms: float | None = None  # began to stop -> serving again, set by the new image
    signals: list[int] = field(default_factory=list)  # `HELD` ones the old image caught
    signal_fd: int | None = None  # a pipe: one byte per signal caught after the stop

    def valid(self) -> bool:
        number = (int, float)
        return (all(type(fd) is int and fd >= 0 for fd in self.fds())
                and type(self.reexecs) is int and type(self.units) is int
                and all(type(n) is int for n in self.signals)
                and all(v is None or (isinstance(v, number) and not isinstance(v, bool))
                        for v in (self.at, self.stopped_at, self.rss_mb, self.pause_ms)))

    def fds(self) -> list[int]:
        return [*self.unix, *self.tcp, *(fd for fd in (self.lock, self.signal_fd)
                                         if fd is not None)]


class Reexec:
    """The daemon's record of its re-execs (for `/v1/status`), and the handover it
    was started with, if any."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.handover = take_handover(environ)
        self.requested = False

    @property
    def inherited(self) -> bool:
        return self.handover is not None and bool(self.handover.unix or self.handover.tcp)

    def inherited_lock(self, path: Path) -> int | None:
        """The lock file's descriptor the previous image held (still locked), or None
        (then, or if it is not `path`'s file, the caller opens and locks it anew)."""
        h = self.handover
        fd = h.lock if h is not None else None
        if fd is None:
            return None
        try:
            a, b = os.fstat(fd), os.stat(path)
            if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                return fd
        except OSError:
            pass
        with contextlib.suppress(OSError):
            os.close(fd)
        return None

    def request(self, units: int, threshold: int) -> bool:
        """Decide to re-exec (the caller then stops as on SIGTERM and calls `exec_self`
        with `next_handover`): logged with the RSS, told to systemd as a reload."""
        if self.requested or not can_exec():
            if not self.requested:
                log.warning("not re-executing: %s cannot be executed", sys.executable)
            return False
        self.requested = True
        log.info("re-executing in place to give back memory: RSS %s MB after storing %d "
                 "units (server.reexec_after_units = %d)", rss_mb(), units, threshold)
        sdnotify.notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}\n"
                         "STATUS=re-executing to give back memory")
        return True

    def next_handover(self, sites: list[Any], lock_file: Any, units: int) -> Handover:
        """What the next image takes over: the listening sockets of `sites` (duplicates,
        so the sites' stop leaves them open) and the lock; one more re-exec."""
        unix, tcp = listening_fds(sites)
        lock = None
        if lock_file is not None:
            lock = os.dup(lock_file.fileno())
            os.set_inheritable(lock, True)
        prev = self.handover.reexecs if self.handover else 0
        return Handover(unix=unix, tcp=tcp, lock=lock, reexecs=prev + 1, at=time.time(),
                        rss_mb=rss_mb(), units=units)

    def served(self) -> None:
        """The new image serves again: the pause is over."""
        h = self.handover
        if h is not None and h.at is not None and h.pause_ms is None:
            now = time.time()
            h.pause_ms = round(1000 * (now - h.at), 1)
            log.info("re-exec #%d done: serving again %.0f ms after the old image began to "
                     "stop (%.0f ms after its execv; it held %s MB after storing %d units)",
                     h.reexecs, h.pause_ms, 1000 * (now - (h.stopped_at or h.at)), h.rss_mb,
                     h.units)

    def status(self) -> dict[str, Any]:
        h = self.handover
        if h is None:
            return {"reexecs": 0, "last_reexec": None}
        return {"reexecs": h.reexecs,
                "last_reexec": {"at": h.at, "rss_mb_before": h.rss_mb,
                                "units_before": h.units, "pause_ms": h.pause_ms}}


def due(units: int, threshold: int) -> bool:
    """A re-exec is due once this image stored `threshold` units or more (0: never).
    The count starts at zero in each image: a new image re-execs only after a new
    backlog of its own."""
    return threshold > 0 and units >= threshold


def can_exec() -> bool:
    """Whether the interpreter can be executed again (an upgrade may have removed it)."""
    return bool(sys.executable) and os.access(sys.executable, os.X_OK)


async def stop_accepting(sites: list[Any], drain_s: float = DRAIN_S) -> None:
    """Stop accepting on `sites` (call after `listening_fds`: the sockets stay open in
    the handover, and a client that connects from now on waits in the backlog for the
    next image), then give the connections this image accepted `drain_s` to send their
    request: the stop serves a request in progress, but drops a connection whose request
    has not arrived yet, and its client would see a reset."""
    for site in sites:
        server = getattr(site, "_server", None)
        if server is not None:
            server.close()
    await asyncio.sleep(drain_s)


def listening_fds(sites: list[Any]) -> tuple[list[int], list[int]]:
    """Duplicates of the listening sockets of aiohttp `sites` (Unix, TCP), inheritable:
    they outlive the sites' stop, so connections queue in the same sockets' backlogs
    until the next image accepts them."""
    unix: list[int] = []
    tcp: list[int] = []
    for site in sites:
        server = getattr(site, "_server", None)  # as aiohttp's runner.addresses reads it
        for s in (getattr(server, "sockets", None) or ()):
            fd = os.dup(s.fileno())
            os.set_inheritable(fd, True)
            (unix if s.family == socket.AF_UNIX else tcp).append(fd)
    return unix, tcp


def adopt(fd: int, *families: int) -> socket.socket | None:
    """A listening socket handed over, or None (and the descriptor closed) when `fd` is
    not a listening stream socket of one of `families`."""
    try:
        s = socket.socket(fileno=fd)
    except OSError:
        return None
    ok = (s.family in families and s.type == socket.SOCK_STREAM
          and s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
    if not ok:
        s.close()
        return None
    os.set_inheritable(fd, False)
    s.setblocking(False)
    return s


async def serve_handed_over(runner: web.BaseRunner, h: Handover, socket_path: Path,
                            tcp_port: int | None) -> tuple[bool, int | None]:
    """Serve on the sockets the previous image handed over (`web.SockSite`): whether the
    Unix socket at `socket_path` is served, and the TCP port served (None: none). One
    that is not what the configuration now asks for (another path; TCP off or another
    port) is closed, and the caller binds what is missing as on a first start."""
    unix_ok, port = False, None
    for fd in h.unix:
        s = adopt(fd, socket.AF_UNIX)
        if s is None:
            continue
        if unix_ok or s.getsockname() != str(socket_path):
            s.close()
            continue
        await web.SockSite(runner, s).start()
        unix_ok = True
    for fd in h.tcp:
        s = adopt(fd, socket.AF_INET, socket.AF_INET6)
        if s is None:
            continue
        bound = s.getsockname()[1]
        if tcp_port is None or tcp_port not in (0, bound) or port not in (None, bound):
            s.close()
            continue
        await web.SockSite(runner, s).start()
        port = bound
    return unix_ok, port


def take_handover(environ: Mapping[str, str]) -> Handover | None:
    """The handover the previous image left in `environ` (removed from it), or None."""
    raw = environ.get(ENV)
    if isinstance(environ, MutableMapping):
        environ.pop(ENV, None)  # not passed on to anything this image starts
    if not raw:
        return None
    try:
        h = Handover(**json.loads(raw))
        if not h.valid():
            raise ValueError("a field of the wrong type")
    except (ValueError, TypeError):
        log.warning("ignoring a malformed %s", ENV)
        return None
    for fd in h.fds():
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)  # nor these
    return h


@dataclass
class Held:
    """`HELD` signals from the old image's stop to its exec (`hold_signals`)."""

    read_fd: int  # the pipe's read end: goes to the new image (`Handover.signal_fd`)
    write_fd: int  # its write end: the signal module's wakeup fd, gone at the exec
    previous_wakeup: int  # the wakeup fd before (the event loop's), put back on release


def hold_signals() -> Held:
    """From the old image's stop to its exec, none of `HELD` is acted on or lost. In this
    (the main) thread they are blocked, and a blocked signal stays pending across `execv`
    until the new image unblocks it (`release_signals`). One the kernel gives another
    thread meanwhile runs the signal module's C handler there, which writes its number to
    the wakeup fd at once: that is a pipe whose read end the new image inherits
    (`exec_self`, `inherited_signals`). Noting it in Python instead (the handler's own
    code runs in the main thread, at its next bytecode) lost a signal that came in the
    last steps before `execv`. Either way the new image acts on it once its handlers are
    in."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    for sig in HELD:
        signal.signal(sig, _noted)
    previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    return Held(r, w, previous)


def _noted(_signum: int, _frame: Any) -> None:
    """A held signal's Python handler: nothing to do, the wakeup fd has it."""


def release_signals(held: Held | None = None) -> None:
    """Unblock `HELD` once this image's handlers are in (or the exec did not happen: then
    `held`, what `hold_signals` set up, is undone): what arrived while they were blocked
    is delivered now."""
    if held is not None:
        signal.set_wakeup_fd(held.previous_wakeup)
        for fd in (held.read_fd, held.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)


def inherited_signals(h: Handover) -> list[int]:
    """The `HELD` signals the previous image noted after its stop: `h.signals`, and one
    per byte its handlers wrote to the pipe `h.signal_fd` (closed here). Once only."""
    found = [n for n in h.signals if n in HELD]
    fd, h.signal_fd = h.signal_fd, None
    if fd is None:
        return found
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):  # not whatever else a bad handover named
            os.set_blocking(fd, False)
            with contextlib.suppress(BlockingIOError):
                while data := os.read(fd, 512):  # b"": the old image's end closed at exec
                    found += [n for n in data if n in HELD]
    except OSError as e:
        log.warning("could not read the signals held across the re-exec: %s", e)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return found


def exec_self(h: Handover, held: Held | None = None) -> NoReturn:
    """Replace this process's image with a fresh one: the same interpreter, its options
    and argv (`sys.orig_argv`), the environment plus the handover, with the pipe of the
    signals `hold_signals` noted (to the last step). Raises OSError when the interpreter
    cannot be executed (the caller exits non-zero: a service manager restarts it)."""
    argv = [sys.executable, *sys.orig_argv[1:]]
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    h.stopped_at = time.time()
    if held is not None:
        os.set_inheritable(held.read_fd, True)  # the write end closes at the exec
        h.signal_fd = held.read_fd
    os.environ[ENV] = json.dumps(asdict(h))
    os.execv(sys.executable, argv)
