"""memoryctl's consolidation verbs: `run consolidate|retention` flags, `memory why`,
`daily`, `archive list|restore|search`, `search --archive`, `sessions summarize
--to-memory`. Standard library and the client only (memoryctl must start fast)."""

from __future__ import annotations

import argparse
from typing import Any

from memoryd.client import MemorydClient


def add_parsers(sub: Any, r: argparse.ArgumentParser, ms: Any, sss: Any,
                search: argparse.ArgumentParser) -> None:
    r.add_argument("--date", help="consolidate: the local day YYYY-MM-DD (default: today)")
    r.add_argument("--since", help="consolidate: every day with sessions from YYYY-MM-DD "
                   "(oldest first)")
    r.add_argument("--until", help="consolidate --since: the last day (default: today)")
    r.add_argument("--dry-run", action="store_true",
                   help="consolidate/retention: report what would change, change nothing")
    why = ms.add_parser("why", help="where entry N came from (sessions, dates, maker)")
    why.add_argument("line", type=int)
    sm = sss.add_parser("summarize", help="summarize a session now")
    sm.add_argument("id")
    sm.add_argument("--agent")
    sm.add_argument("--machine", help="in a fleet: the machine whose session it is")
    sm.add_argument("--to-memory", action="store_true",
                    help="then send the summary through MEMORY.md admission")
    search.add_argument("--archive", action="store_true",
                        help="search archived units (older than retention.units_keep_days)")
    d = sub.add_parser("daily", help="daily notes: list them, or print one")
    d.add_argument("date", nargs="?", help="YYYY-MM-DD")
    a = sub.add_parser("archive", help="archived sessions: list, restore, search")
    aa = a.add_subparsers(dest="action", metavar="ACTION")
    aa.required = True
    aa.add_parser("list", help="archive files and the sessions in them")
    rs = aa.add_parser("restore", help="move a session's units back into the store")
    rs.add_argument("id")
    rs.add_argument("--agent")
    rs.add_argument("--dry-run", action="store_true")
    sa = aa.add_parser("search", help="search archived units")
    sa.add_argument("query", nargs="+")
    sa.add_argument("-n", "--max-results", type=int, default=15)


def job_params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if args.date:
        params["date"] = args.date
    for k in ("since", "until"):
        if getattr(args, k, None):
            params[k] = getattr(args, k)
    if args.dry_run:
        params["dry_run"] = True
    return params


def render_run(d: dict[str, Any]) -> str | None:
    """Consolidation and retention reports; None for other jobs."""
    r = d.get("result")
    if not isinstance(r, dict):
        return None
    dry = " (dry run: nothing written)" if r.get("dry_run") else ""
    if "since" in r and "days" in r:
        lines = [f"consolidated {len(r['days'])} days with sessions from {r['since']} to "
                 f"{r['until']}{dry}"]
        lines += [f"  {d['date']}: {d['sessions']} sessions; note +{d['daily_added']}; "
                  f"MEMORY.md +{d['added']} added, {d['confirmed']} confirmed, "
                  f"{d['superseded']} superseded, {d['demoted']} demoted, "
                  f"{d['dropped']} dropped" for d in r["days"]]
        return "\n".join(lines)
    if "memory" in r and "daily" in r:
        m = r["memory"]
        lines = [f"consolidated {r['date']}{dry}: {r['sessions']} sessions; daily note "
                 f"+{r['daily']['added']} items, {len(r['daily']['dropped'])} dropped as noise"]
        lines += _memory_lines(m)
        return "\n".join(lines)
    if "daily_notes" in r:
        n, a = r["daily_notes"], r["archived"]
        lines = [f"retention{dry}: {len(n['folded'])} daily notes folded into HISTORY.md, "
                 f"{len(a['sessions'])} sessions ({a['units']} units) archived"]
        lines += [f"  note {x}" for x in n["folded"]]
        lines += [f"  {s['agent']} {s['session_id']} -> {s['month']} ({s['units']} units)"
                  for s in a["sessions"]]
        return "\n".join(lines)
    return None


def _memory_lines(m: dict[str, Any], every_drop: bool = False) -> list[str]:
    """The admission report; `every_drop`: list each sentence left out (one session's),
    else only count those below the threshold (a whole day's)."""
    dropped = m.get("dropped", [])
    lines = [f"MEMORY.md: +{len(m['added'])} added, {len(m['confirmed'])} confirmed, "
             f"{len(m['superseded'])} superseded, {len(m['demoted'])} demoted, "
             f"{len(dropped)} dropped"]
    for kind in ("added", "confirmed", "superseded", "demoted"):
        for a in m[kind]:
            lines.append(f"  {kind}: {a['item']}  ({a['why']})")
    below = 0
    for d in dropped:
        if d["reason"] == "below threshold" and not every_drop:
            below += 1
            continue
        lines.append(f"  dropped ({d['reason']}): {d['item']}  ({d['why']})")
    if below:
        lines.append(f"  dropped (below threshold): {below} sentences")
    return lines


def cmd_daily(args: argparse.Namespace, c: MemorydClient) -> Any:
    if args.date:
        return c.request("GET", f"/v1/daily/{args.date}"), lambda d: d["text"].rstrip()
    return c.request("GET", "/v1/daily"), lambda d: "\n".join(d["dates"]) or "no daily notes"


def cmd_archive(args: argparse.Namespace, c: MemorydClient) -> Any:
    if args.action == "list":
        return c.request("GET", "/v1/archive"), _render_archive
    if args.action == "restore":
        data = c.request("POST", "/v1/archive/restore", {
            "session_id": args.id, "agent": args.agent, "dry_run": args.dry_run})
        return data, lambda d: (f"{d['agent']} {d['session_id']}: {d['archived_units']} "
                                f"archived units, {d['restored']} restored"
                                + (" (dry run)" if d["dry_run"] else ""))
    return archive_search(c, " ".join(args.query), args.max_results)


def archive_search(c: MemorydClient, query: str, n: int, agent: str | None = None) -> Any:
    data = c.request("POST", "/v1/archive/search", {"q": query, "max_results": n,
                                                    "agent": agent})
    return data, _render_archive_hits


def _render_archive(d: dict[str, Any]) -> str:
    if not d["files"]:
        return "no archive files"
    lines = [f"{f['month']}  {f['bytes']:>10,} B  {f['path']}" for f in d["files"]]
    lines += [f"  {s['month']}  {s['agent']}  {s['session_id']}  ({s['units']} units)"
              for s in d["sessions"]]
    return "\n".join(lines)


def _render_archive_hits(d: dict[str, Any]) -> str:
    lines = [d["message"]]
    for h in d["results"]:
        lines.append(f"[{h['month']}] {h['agent']} {h['session_id']} #{h['seq']} {h['role']}: "
                     + " ".join(str(h["content"]).split())[:200])
    return "\n".join(lines)


def render_why(d: dict[str, Any]) -> str:
    lines = [f"line {d['line']}: {d['entry']['text']}"]
    for it in d["items"]:
        p = it["provenance"]
        if p is None:
            lines.append(f"  {it['item']}: no provenance (written by hand or by the API)")
            continue
        lines.append(f"  {it['item']}")
        lines.append(f"    made by {p['made_by']} ({p['prompt_version']}), importance "
                     f"{p['importance']}, first seen {p['first_seen']}, last confirmed "
                     f"{p['last_confirmed']} ({p['confirmations']} confirmations), {p['state']}")
        if it.get("subjects"):
            lines.append("    about: " + "; ".join(it["subjects"]))
        if it.get("reasons"):
            lines.append("    why: " + ", ".join(it["reasons"]))
        for s in it["sessions"]:
            lines.append(f"    {s['day']}  {s['agent']} {s['session_id']}  units "
                         f"{', '.join(map(str, s['unit_ids']))}")
        for r in it.get("replaced") or []:
            lines.append(f"    replaced: {r['item']}  (since {r['first_seen']})")
    return "\n".join(lines)


def cmd_summarize(args: argparse.Namespace, c: MemorydClient) -> Any:
    q = {"agent": args.agent, "machine": args.machine, "wait": "true"}
    if args.to_memory:
        q["to_memory"] = "true"
    data = c.request("POST", f"/v1/sessions/{args.id}/summarize", query=q)

    def render(d: dict[str, Any]) -> str:
        lines = [f"{d['agent']} {d['session_id']}: summary by {d['made_by']}",
                 d.get("summary") or "(no summary)"]
        if d.get("to_memory") is not None:
            lines += _memory_lines(d["to_memory"], every_drop=True)
        return "\n".join(lines)

    return data, render
