"""Backfill progress in `memoryctl status`, and `status --watch`: a live progress bar
(redrawn in place on a terminal, one line per refresh otherwise) until caught up."""

from __future__ import annotations

import sys
import time

from memoryd.client import MemorydClient
from memoryd.status_text import backfill_line, human_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

BAR = 30


def bar(b: dict[str, Any]) -> str:
    filled = int(BAR * min(100.0, b["percent"]) / 100)
    return "[" + "#" * filled + "-" * (BAR - filled) + "] " + backfill_line(b)


def watch(c: MemorydClient, interval: float = 1.0, out: Any = None) -> int:
    """Redraw until the daemon has caught up (exit 0) or Ctrl-C."""
    out = out or sys.stdout
    tty = out.isatty()
    try:
        while True:
            s = c.status()
            b = s.get("backfill") or {}
            line = bar(b) if b else "no backfill progress reported"
            state = "caught up" if s["caught_up"] else (
                f"queue {s['queue_depth']}, {human_bytes(s['unread_bytes'])} unread")
            text = f"{line} · {state}"
            out.write(("\r\x1b[2K" + text) if tty else text + "\n")
            out.flush()
            if s["caught_up"]:
                if tty:
                    out.write("\n")
                return 0
            time.sleep(interval)
    except KeyboardInterrupt:
        if tty:
            out.write("\n")
        return 0
