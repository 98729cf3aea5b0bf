"""Rendering for memoryctl: human text by default, JSON with --json."""

from __future__ import annotations

import json
import sys

from memoryd.status_text import (  # noqa: F401  (memoryctl's renderers, re-exported)
    consolidation_lines,
    render_status,
    store_down_line,
    when,
)

TYPE_CHECKING = False  # typing costs ~6 ms to import; annotations are strings
if TYPE_CHECKING:
    from typing import Any


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def render_search(r: dict[str, Any]) -> str:
    out = [r["message"]]
    for i, x in enumerate(r["results"], 1):
        where = (f"archived {x['archived']}" if x.get("archived")
                 else f"score {x['score']:.2f}")
        out.append(f"{i:>3}. [{x['agent']} {x['session_id']} turn {x['turn']} {x['role']} "
                   f"{when(x['ts'])}] {where}")
        out.append(f"     {x['snippet']}")
    return "\n".join(out)


def render_sessions(r: dict[str, Any]) -> str:
    rows = r["sessions"]
    if not rows:
        return "no sessions"
    out = []
    for s in rows:
        title = (s.get("title") or "")[:60]
        sid = s["session_id"] + (f" @{s['machine']}" if s.get("machine") else "")
        out.append(f"{when(s['last_ts'])}  {s['agent']:<12} {sid:<40} "
                   f"{s['units']:>5} units  {title}")
    return "\n".join(out)


def render_session(s: dict[str, Any]) -> str:
    roles = ", ".join(f"{n} {r}" for r, n in sorted(s["roles"].items()))
    on = f" on {s['machine']}" if s.get("machine") else ""
    out = [f"{s['agent']} session {s['session_id']}{on}"
           + (f" — {s['title']}" if s["title"] else ""),
           f"project  {s['project'] or '-'}",
           f"time     {when(s['first_ts'])} → {when(s['last_ts'])}",
           f"units    {s['units']} ({roles}), {s['turns']} turns",
           f"files    {', '.join(s['files']) or '-'}"]
    if s.get("summary"):
        out += ["summary", "  " + s["summary"].replace("\n", "\n  ")]
    for m in s.get("messages", []):
        text = " ".join(m["content"].split())
        out.append(f"  #{m['seq']:<5} {m['role']:<9} {text[:110]}")
    return "\n".join(out)


def render_memory(d: dict[str, Any]) -> str:
    # split on \n only: the daemon numbers lines that way (splitlines also breaks on
    # \x0b, \x85, U+2028 and would disagree with `memory rm`)
    lines = d["content"].split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return "MEMORY.md is empty"
    return "\n".join(f"{i:>4}  {line}" for i, line in enumerate(lines, 1))


def _entry(e: dict[str, Any]) -> str:
    return f"{e['line']:>4}  {e['date']}  {e['source']:<12} {'；'.join(e['items'])}"


def render_memory_entries(d: dict[str, Any]) -> str:
    entries = d.get("entries", d.get("results", []))
    return "\n".join(_entry(e) for e in entries) or "no entries"


def render_memory_stats(d: dict[str, Any]) -> str:
    per = ", ".join(f"{k} {v}" for k, v in sorted(d.get("per_source", {}).items()))
    span = f"{d.get('first_date') or '-'} → {d.get('last_date') or '-'}"
    return f"{d['total']} entries ({per or 'none'}); {span}"


def render_memory_search(d: dict[str, Any]) -> str:
    return "\n".join([d["message"], *(_entry(e) for e in d["results"])])


def render_job(d: dict[str, Any]) -> str:
    res = d["result"]
    detail = ", ".join(f"{k}={v}" for k, v in res.items()) if isinstance(res, dict) else str(res)
    return f"{d['job']}: {detail or 'done'}"


def render_ingest(d: dict[str, Any]) -> str:
    if d["new_units"] is None:
        return f"{d['files']} files queued"
    out = [f"{d['files']} files read, {d['new_units']} new units"]
    ignored = d.get("ignored") or []
    if ignored:
        out[0] += f"; {len(ignored)} ignored:"
        out += [f"  {x['path']}: {x['reason']}" for x in ignored]
    return "\n".join(out)
