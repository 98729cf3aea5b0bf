"""`memoryd status` as text: the lines `memoryctl status` prints, rendered by the daemon
for `GET /v1/status?format=text` (memoryctl's quick path) and by memoryctl from the JSON.
Here, not in cli/, so the server need not import the CLI; standard library only, as
memoryctl's fast path imports it."""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing costs ~6 ms to import; annotations are strings
if TYPE_CHECKING:
    from typing import Any


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def backfill_line(b: dict[str, Any]) -> str:
    eta = "-" if b.get("eta_s") is None else duration(b["eta_s"])
    text = (f"{b['files_done']}/{b['files_total']} files, {human_bytes(b['bytes_done'])}/"
            f"{human_bytes(b['bytes_total'])} ({b['percent']:.0f}%), "
            f"{human_bytes(b['rate_bytes_s'])}/s")
    if b["done"]:
        return f"{text}, done in {duration(b['elapsed_s'])}"
    return f"{text}, ETA {eta}"


def duration(s: float) -> str:
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


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
    if e := s.get("embed"):
        lines.append(f"embed    {embed_line(e)}")
    if s.get("backfill") and s["backfill"].get("files_total"):
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


def embed_line(e: dict[str, Any]) -> str:
    """Local embeddings (`memoryd.embed`): off and why, or the worker's progress."""
    if not e.get("enabled"):
        return f"off ({e.get('reason') or 'not started'}): search and context are lexical"
    pending = e.get("pending")
    line = (f"{e.get('model')}; {e.get('done', 0)} units embedded, "
            + ("caught up" if e.get("caught_up") else
               f"{pending if pending is not None else '?'} waiting")
            + ("; the model is loaded" if e.get("loaded") else "; the model is unloaded"))
    if e.get("waiting_for_backfill"):
        line += "; waiting for the backfill"
    if e.get("queries"):  # searches and contexts (each asks the model once)
        line += f"; queries searched by meaning: {e['queries']}"
    if e.get("units_per_s"):
        line += f"; {e['units_per_s']:g} units/s this run"
    if entries := e.get("entries"):  # MEMORY.md's (`memoryd.embed.entries`)
        line += f"; MEMORY.md entries embedded: {entries['embedded']}"
        if entries.get("pending"):
            line += f" ({entries['pending']} waiting)"
        if entries.get("error"):
            line += f" (MEMORY.md unreadable: {entries['error']})"
    if e.get("errors"):
        line += f"; {e['errors']} errors, the last: {e.get('last_error')}"
    return line


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
