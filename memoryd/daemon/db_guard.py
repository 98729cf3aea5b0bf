"""Notice when memoryd.db is deleted or replaced under a running daemon.

SQLite keeps writing to the open (now unlinked) inode, so every later write would
vanish. The only safe answer is to stop: the daemon exits non-zero and the service
manager (Restart=on-failure) starts it again onto a fresh store, which reads the
transcripts again from the start.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

# a replaced file is rare and what the daemon wrote to the old one meanwhile is read again
# from the transcripts after the restart: a look every 10 s (each a thread hop) is enough
CHECK_S = 10.0


def identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


async def watch_identity(path: Path, on_change: Callable[[str], None],
                         period: float = CHECK_S) -> None:
    """Check `path`'s (device, inode) every `period` seconds; on a change, call
    `on_change(reason)` once and return."""
    first = await asyncio.to_thread(identity, path)
    while True:
        await asyncio.sleep(period)
        now = await asyncio.to_thread(identity, path)
        if now != first:
            reason = (f"{path} was deleted" if now is None
                      else f"{path} was replaced (inode {first} -> {now})")
            log.critical("%s while memoryd was running; exiting so the service manager "
                         "restarts it onto a fresh store", reason)
            on_change(reason)
            return
