"""Backfill progress in `memoryctl status`, and `status --watch`: a live progress bar
(redrawn in place on a terminal, one line per refresh otherwise) until caught up."""

from __future__ import annotations

import sys
import time

from memoryd.client import MemorydClient

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

BAR = 30


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def backfill_line(b: dict[str, Any]) -> str:
    eta = "-" if b.get("eta_s") is None else _duration(b["eta_s"])
    text = (f"{b['files_done']}/{b['files_total']} files, {human_bytes(b['bytes_done'])}/"
            f"{human_bytes(b['bytes_total'])} ({b['percent']:.0f}%), "
            f"{human_bytes(b['rate_bytes_s'])}/s")
    if b["done"]:
        return f"{text}, done in {_duration(b['elapsed_s'])}"
    return f"{text}, ETA {eta}"


def bar(b: dict[str, Any]) -> str:
    filled = int(BAR * min(100.0, b["percent"]) / 100)
    return "[" + "#" * filled + "-" * (BAR - filled) + "] " + backfill_line(b)


def _duration(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


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
