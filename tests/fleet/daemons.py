"""Real daemons of a fleet in one test process: each machine its own home, transcript
root and socket, one PostgreSQL namespace (`team`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from memoryd.config import load_settings
from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths
from tests.helpers import AsyncClient, caught_up, wait_for


def msg(i: int, text: str) -> dict:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": text, "id": f"m{i}"}


def fleet_settings(root: Path, sock: Path, url: str, machine: str, *,
                   embed: bool = False) -> Any:
    """`embed`: local embeddings on (tests/embed); off elsewhere, as `settings_for` has it."""
    return load_settings(None, environ={}, overrides={
        "watch": {"sources": [{"agent": "generic", "path": root}], "default_sources": False,
                  "reconcile_seconds": 0.3},
        "server": {"socket": sock, "tcp_port": 0},
        "embed": {"enabled": embed},
        "store": {"url": url, "machine": machine, "namespace": "team"}})


@contextlib.asynccontextmanager
async def fleet_daemons(tmp_path: Path, roots: dict[str, Path], sock_dir: Path, url: str,
                        *, embed: bool = False
                        ) -> AsyncIterator[dict[str, tuple[Daemon, AsyncClient]]]:
    """A started daemon per machine (its home under tmp_path/<machine>/home, its socket
    <machine>.sock in sock_dir), each caught up; stopped on the way out."""
    out: dict[str, tuple[Daemon, AsyncClient]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for m, root in roots.items():
            home = tmp_path / m / "home"
            home.mkdir(parents=True)
            dm = Daemon(fleet_settings(root, sock_dir / f"{m}.sock", url, m, embed=embed),
                        resolve_paths(home), environ={})
            await dm.start()
            stack.push_async_callback(dm.stop)
            out[m] = (dm, AsyncClient(sock_dir / f"{m}.sock"))
        for _, c in out.values():
            await wait_for(lambda c=c: caught_up(c))
        yield out
