"""Rendering for memoryctl: human text by default, JSON with --json."""

from __future__ import annotations

import json
import sys
import time

TYPE_CHECKING = False  # typing costs ~6 ms to import; annotations are strings
if TYPE_CHECKING:
    from typing import Any


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


def store_down_line(st: dict[str, Any]) -> str:
    """`store: unreachable since …` (status and doctor), with what it means."""
    return (f"store: unreachable since {st.get('unreachable_since')} "
            f"({st.get('failures', 0)} failed attempts; {st.get('last_error') or 'no answer'}); "
            "search and context answer from the local index (stale), ingest waits: "
            "the transcripts keep what is not read yet; caught_up: false")


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
    ]
    srcs = s.get("sources") or []
    lines += [f"source   {x['agent']} {x['path']}" for x in srcs if x.get("exists", True)]
    if missing := sum(1 for x in srcs if not x.get("exists", True)):
        lines.append(f"source   {missing} more not there yet (watched for)")
    if st := s.get("store"):
        where = st.get("path") if st["kind"] == "sqlite" and st.get("path") else st["url"]
        lines.append(f"truth    {st['kind']} {where}" + (
            f", namespace {st['namespace']}, machine {st['machine']}"
            if st["kind"] != "sqlite" else ""))
        if st.get("reachable") is False:
            lines.append(store_down_line(st))
        for m in st.get("machines") or []:
            lines.append(f"machine  {m['machine']}: last ingest {when(m.get('last_ingest'))}, "
                         f"{m.get('files', 0)} files"
                         + (f"; index reported {when(m['last_seen'])}"
                            if m.get("last_seen") else ""))
    ix = s.get("index")
    if ix:
        lines.append(f"index    {ix['state']}; {ix['units']} units"
                     + ("" if ix.get("caught_up") else ", catching up")
                     + (f"; lag {ix['lag']['changes']} changes"
                        + (f", {ix['lag']['seconds']:g}s" if ix["lag"].get("seconds") else "")
                        if ix.get("lag") is not None else "")
                     + (f"; row cache {ix['row_cache']['units']} units, "
                        f"{ix['row_cache']['bytes'] / 1e6:.1f} MB"
                        if ix.get("row_cache") else "")
                     + (f"; error: {ix['error']}" if ix.get("error") else ""))
    if s.get("backfill") and s["backfill"].get("files_total"):
        from memoryd.cli.progress import backfill_line

        lines.append(f"backfill {backfill_line(s['backfill'])}")
    q = s.get("queries")
    if q:
        lines.append(f"queries  {q['running']}/{q['concurrency']} running, {q['waiting']}/"
                     f"{q['backlog']} waiting (at most {q['max_wait_s']:g}s); "
                     f"{q['rejected']} turned away busy (503) since start")
    if mem := s.get("memory"):
        lines.append(f"memory   RSS {mem['rss_mb']} MB; {mem['idle_releases']} idle releases"
                     + (f", the last gave back {mem['last_freed_mb']} MB"
                        if mem.get("last_freed_mb") is not None else ""))
    llm = s.get("llm")
    if llm:
        if llm.get("in_use") == "extractive" or not llm.get("model"):
            what = f"extractive ({llm.get('extractive_reason') or 'no model'})"
        else:
            what = llm["model"]
        if llm.get("paused"):
            what += f"; PAUSED: {llm['paused']} (memoryctl run resume_llm)"
        b, t = llm.get("budget", {}), llm.get("today", {})
        lines.append(f"llm      {what}; today {t.get('calls', 0)} calls, "
                     f"{b.get('used_today', 0)}/{b.get('daily_tokens', 0)} tokens, "
                     f"${t.get('cost_usd', 0):.4f}")
    if (s.get("summaries") or {}).get("enabled") is False:
        lines.append("summary  off (summary.enabled = false): no session is summarized on its "
                     "own; `memoryctl sessions summarize ID` still does one")
    jobs = (s.get("summaries") or {}).get("jobs")
    if jobs:
        lines.append(f"jobs     {jobs['pending']} pending, {jobs['running']} running, "
                     f"{jobs['done']} done, {jobs['failed']} failed"
                     + (f"; last error: {jobs['last_error']}" if jobs.get("last_error") else ""))
    lines += consolidation_lines(s.get("consolidation") or {})
    lines.append("sources:")
    for src in s["sources"]:
        mark = "" if src["exists"] else "  (not present)"
        lines.append(f"  {src['agent']:<12} {src['path']}{mark}")
    ingest = s["ingest"]
    for f in ingest.get("failing_files", []):
        lines.append(f"FAILING  {f['path']}: {f['reason']} ({f['kind']}, {f['attempts']} "
                     f"tries, next in {f['retry_in_s']:.0f}s)")
    for b in ingest.get("files_with_bad_lines", [])[:10]:
        last = f"; last at line {b['last_line']}: {b['last_reason']}" if b.get("last_line") else ""
        lines.append(f"bad lines {b['bad_lines']:>5}  {b['path']}{last}")
    if ingest.get("last_error"):
        lines.append(f"last error: {ingest['last_error']}")
    return "\n".join(lines)


def consolidation_lines(c: dict[str, Any]) -> list[str]:
    """Per recent day what consolidation did, the history's progress, and warnings."""
    if not c:
        return []
    lines = []
    h = c.get("history") or {}
    if h.get("looked") and h.get("days_with_sessions"):
        left = h["days_left"]
        lines.append(f"consol.  history {h['days_done']}/{h['days_with_sessions']} days "
                     "consolidated" + (f", {left} to go (next {h['next']})" if left else ""))
    elif not c.get("enabled", True):
        lines.append("consol.  off (consolidate.enabled or summary.enabled is false)")
    for d in c.get("days") or []:
        if d["sessions"] is None:  # every run of the day failed
            what = f"FAILED: {d['last_error']}"
        else:
            what = (f"{d['sessions']} sessions; +{d['added']} added, {d['confirmed']} "
                    f"confirmed, {d['superseded']} superseded, {d['demoted']} demoted, "
                    f"{d['dropped']} dropped; note +{d['daily_added']}")
            if not d["last_ok"]:
                what += f"; last run FAILED: {d['last_error']}"
        lines.append(f"  {d['date']}  {d['runs']} runs, last {d['last_run_at'][11:16]} "
                     f"({d['last_trigger']}): {what}")
    lines += [f"WARNING  {w}" for w in c.get("warnings") or []]
    return lines


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
