"""Rendering for memoryctl: human text by default, JSON with --json."""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def render_status(s: dict[str, Any]) -> str:
    lines = [
        f"memoryd {s['version']} ({s['state']}), pid {s['pid']}, up {s['uptime_s']:.0f}s",
        f"socket   {s['socket']}" + (f"   tcp 127.0.0.1:{s['tcp_port']}" if s.get("tcp_port")
                                     is not None else ""),
        f"store    {s['sessions']} sessions, {s['units']} units, {s['files']} files "
        f"({s['ignored_files']} ignored), {s['bad_lines']} bad lines",
        f"ingest   {'caught up' if s['caught_up'] else 'catching up'}; backfill "
        f"{'done' if s['backfill_done'] else 'running'}; {s['unread_bytes']} bytes unread; "
        f"queue {s['queue_depth']}; lag "
        + (f"{s['ingest_lag_ms']:.0f} ms" if s.get("ingest_lag_ms") is not None else "-"),
        "sources:",
    ]
    for src in s["sources"]:
        mark = "" if src["exists"] else "  (not present)"
        lines.append(f"  {src['agent']:<12} {src['path']}{mark}")
    if s["ingest"].get("last_error"):
        lines.append(f"last error: {s['ingest']['last_error']}")
    return "\n".join(lines)


def render_search(r: dict[str, Any]) -> str:
    out = [r["message"]]
    for i, x in enumerate(r["results"], 1):
        out.append(f"{i:>3}. [{x['agent']} {x['session_id']} turn {x['turn']} {x['role']} "
                   f"{when(x['ts'])}] score {x['score']:.2f}")
        out.append(f"     {x['snippet']}")
    return "\n".join(out)


def render_sessions(r: dict[str, Any]) -> str:
    rows = r["sessions"]
    if not rows:
        return "no sessions"
    out = []
    for s in rows:
        title = (s.get("title") or "")[:60]
        out.append(f"{when(s['last_ts'])}  {s['agent']:<12} {s['session_id']:<40} "
                   f"{s['units']:>5} units  {title}")
    return "\n".join(out)
