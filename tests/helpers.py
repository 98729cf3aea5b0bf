"""Test helpers: polling with a deadline, short socket paths, a running daemon."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from memoryd.client import MemorydClient
from memoryd.config import load_settings
from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths

# Waits are bounds, not figures: a passing test returns as soon as its condition holds,
# so they are generous for a shared, slow machine (where `import litellm` alone can take
# 20 s of CPU). MEMORYD_TEST_SLOWDOWN scales them.
SLOWDOWN = float(os.environ.get("MEMORYD_TEST_SLOWDOWN", "4"))


async def wait_for(pred: Callable[[], Awaitable[Any] | Any], timeout: float = 10.0,
                   interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout * SLOWDOWN
    while True:
        value = pred()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


def wait_until(pred: Callable[[], Any], timeout: float = 30.0) -> Any:
    """`wait_for` for tests that drive a daemon process from plain (sync) code: a daemon
    not up yet, or its socket refusing, counts as "not yet"."""
    from memoryd.client import DaemonNotRunning

    deadline = time.monotonic() + timeout * SLOWDOWN
    last: object = None
    while time.monotonic() < deadline:
        try:
            v = pred()
        except (DaemonNotRunning, OSError) as e:
            v, last = None, e
        if v:
            return v
        last = v if v is not None else last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s; last seen: {last!r}")


@contextlib.contextmanager
def short_dir():
    """A directory under /tmp short enough for a Unix socket path."""
    d = tempfile.mkdtemp(prefix="md", dir="/tmp")
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def settings_for(sources: list[tuple[str, Path]], sock: Path, *, embed: bool = False,
                 **watch: Any) -> Any:
    """`embed`: local embeddings on (tests/embed); off elsewhere, so rankings stay lexical
    and no test pays for the model it does not test."""
    return load_settings(None, environ={}, overrides={
        "watch": {"sources": [{"agent": a, "path": p} for a, p in sources],
                  "default_sources": False, "reconcile_seconds": 0.3, **watch},
        "server": {"socket": sock, "tcp_port": 0},
        "embed": {"enabled": embed},
    })


@contextlib.asynccontextmanager
async def running_daemon(home: Path, sources: list[tuple[str, Path]], sock: Path,
                         *, embed: bool = False, **watch: Any) -> AsyncIterator[Daemon]:
    d = Daemon(settings_for(sources, sock, embed=embed, **watch), resolve_paths(home),
               environ={})
    await d.start()
    try:
        yield d
    finally:
        await d.stop()


class AsyncClient:
    """MemorydClient is synchronous (memoryctl's); tests call it off the loop."""

    def __init__(self, sock: Path) -> None:
        self.sync = MemorydClient(sock)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        fn = getattr(self.sync, name)

        async def call(*a: Any, **kw: Any) -> Any:
            return await asyncio.to_thread(fn, *a, **kw)

        return call


def write_jsonl(path: Path, rows: list[dict[str, Any]], mode: str = "a") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode, encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


async def ctl(capsys: Any, sock: Path, *args: str, stdin: str | None = None,
              monkeypatch: Any = None) -> tuple[int, str, str]:
    """memoryctl in-process against the daemon at `sock`: (exit code, stdout, stderr)."""
    import io

    from memoryd.cli.commands import main

    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = await asyncio.to_thread(main, ["--socket", str(sock), *args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


async def caught_up(c: AsyncClient) -> dict[str, Any] | None:
    st = await c.status()
    return st if st["caught_up"] else None


@contextlib.contextmanager
def tmpfs(mnt: Path, size: str = "256k") -> Iterator[Path]:
    """A small tmpfs at `mnt` (created): writes past `size` fail with a real ENOSPC.
    Mounting needs root (CI runs as root): elsewhere the test is skipped, saying why."""
    import pytest

    mnt.mkdir(mode=0o700, parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                        str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        why = f"cannot mount a tmpfs at {mnt} (needs root): {r.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(fs: Path) -> Path:
    """Take every free byte of the filesystem at `fs`: the next write gets ENOSPC."""
    junk = fs / "junk"
    with contextlib.suppress(OSError), open(junk, "wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"x" * size)
    return junk
