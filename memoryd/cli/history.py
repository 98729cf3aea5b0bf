"""memoryctl verbs over the user's history: what was served to agents (`served`),
taking it out (`export`), and taking things out of memory (`forget --query`,
`exclude`). Standard library and `memoryd.client` only: memoryctl must start fast."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from memoryd.cli import output
from memoryd.client import MemorydClient

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def add_parsers(sub: Any) -> None:
    sv = sub.add_parser("served", help="the context served to agents, and tokens per day")
    sv.add_argument("--session", dest="session_id")
    sv.add_argument("--agent")
    sv.add_argument("--last", type=int, default=20, help="how many entries (default 20)")
    sv.add_argument("--days", type=int, default=7, help="daily totals for this many days")

    ex = sub.add_parser("export", help="write sessions as Markdown or JSONL (stdout or --out)")
    ex.add_argument("--session", dest="session_id", help="one session (id or unique prefix)")
    ex.add_argument("--project")
    ex.add_argument("--agent")
    ex.add_argument("--machine", help="with --session, in a fleet: the machine whose "
                                      "session it is")
    ex.add_argument("--since", help="ISO date/time or Unix seconds")
    ex.add_argument("--format", choices=["md", "jsonl"], default="md")
    ex.add_argument("-o", "--out", help="write to this file instead of stdout")

    fg = sub.add_parser("forget", help="delete every stored turn matching a query")
    fg.add_argument("--query", required=True, help="what to forget (all of its words)")
    fg.add_argument("--dry-run", action="store_true", help="only say what would go")
    fg.add_argument("--agent")
    fg.add_argument("--project")
    fg.add_argument("--yes", action="store_true", help="do not ask")

    xc = sub.add_parser("exclude", help="stop reading a path or project; --purge deletes "
                                        "what was stored from it")
    xc.add_argument("target", nargs="?", help="a file or folder path, or a project directory")
    xc.add_argument("--project", action="store_true",
                    help="TARGET is a project (the agents' working directory)")
    xc.add_argument("--purge", action="store_true", help="also delete what was stored")
    xc.add_argument("--list", action="store_true", help="list the exclusions")


Result = "int | tuple[Any, Any]"


def cmd_served(args: argparse.Namespace, c: MemorydClient) -> Result:
    if args.last < 1 or args.days < 1:
        print("memoryctl: --last and --days must be 1 or more", file=sys.stderr)
        return EXIT_USAGE
    data = c.request("GET", "/v1/context/log", query={
        "session_id": args.session_id, "agent": args.agent, "last": args.last,
        "days": args.days})
    return data, render_served


def render_served(d: dict[str, Any]) -> str:
    out = []
    for e in d["entries"]:
        items = ", ".join(i["id"] for i in e["items"]) or "nothing"
        q = f" q={e['query']!r}" if e.get("query") else ""
        out.append(f"{output.when(e['ts'])}  {e['via']:<9} {e['agent'] or '-':<12} "
                   f"{e['session_id'] or '-':<24} {e['tokens']:>5} tok{q}")
        out.append(f"    items: {items}")
    if not out:
        out.append("no context served yet" + (" (the log is off: privacy.served_log_days = 0)"
                                              if d.get("keep_days") == 0 else ""))
    if d["daily"]:
        out.append("tokens served per day:")
        out += [f"  {x['day']}  {x['tokens']:>8} tokens in {x['requests']} requests"
                for x in d["daily"]]
    return "\n".join(out)


def cmd_export(args: argparse.Namespace, c: MemorydClient) -> Result:
    query = {"session_id": args.session_id, "project": args.project, "agent": args.agent,
             "machine": args.machine, "since": args.since, "format": args.format}
    text = c.request("GET", "/v1/export", query=query)
    if not isinstance(text, str):  # a JSON error body is raised by the client
        text = str(text)
    if args.out:
        Path(args.out).expanduser().write_text(text, encoding="utf-8")
        print(f"wrote {args.out} ({len(text.encode())} bytes)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def cmd_forget(args: argparse.Namespace, c: MemorydClient) -> Result:
    body = {"query": args.query, "agent": args.agent, "project": args.project}
    body = {k: v for k, v in body.items() if v is not None}
    plan = c.request("POST", "/v1/forget", {**body, "dry_run": True})
    if args.dry_run or not plan["units"]:
        return plan, render_forget
    if not args.yes:
        print(render_forget(plan))
        no = refused(f"Forget these {plan['units']} turns everywhere? This cannot be undone "
                     "[y/N] ")
        if no is not None:
            return no
    return c.request("POST", "/v1/forget", {**body, "dry_run": False}), render_forget


def refused(question: str) -> int | None:
    """Ask on the terminal: None when the answer is yes, else the exit code. Without a
    terminal (a script, a pipe) nothing is deleted and the exit is a usage error: --yes
    is how a script says yes; silence is not taken for consent."""
    if not sys.stdin.isatty():
        print("memoryctl: nothing forgotten: no terminal to ask on; add --yes to forget "
              "without asking", file=sys.stderr)
        return EXIT_USAGE
    if input(question).strip().lower() in ("y", "yes"):
        return None
    print("nothing forgotten")
    return EXIT_ERROR


def render_forget(d: dict[str, Any]) -> str:
    if not d["units"]:
        return f"nothing stored matches {d['query']!r} (all of: {', '.join(d['terms'])})"
    verb = "would forget" if d["dry_run"] else "forgot"
    out = [f"{verb} {d['units']} turns in {len(d['sessions'])} sessions matching "
           f"{d['query']!r}"]
    for s in d["sessions"]:
        out.append(f"  {s['agent']:<12} {s['session_id']:<40} {s['units']:>4} turns")
    for x in d.get("examples", []):
        out.append(f"    - {x}")
    if not d["dry_run"] and d["units"]:
        out.append(f"summaries rebuilt: {d.get('summaries_rebuilt', 0)} sessions; "
                   f"MEMORY.md entries mentioning it: {d.get('memory_entries', 0)}"
                   + (" (review them with `memoryctl memory search`)"
                      if d.get("memory_entries") else ""))
        m = d.get("memory") or {}
        if any(m.values()):
            out.append(f"memory items only those turns stood behind, removed: "
                       f"{len(m.get('memory_items_removed', []))} in MEMORY.md, "
                       f"{len(m.get('history_lines_removed', []))} in HISTORY.md")
    return "\n".join(out)


def cmd_exclude(args: argparse.Namespace, c: MemorydClient) -> Result:
    if args.list or not args.target:
        return c.request("GET", "/v1/exclusions"), render_exclusions
    target = args.target
    if not args.project or target.startswith((".", "~")):
        target = str(Path(target).expanduser().absolute())
    data = c.request("POST", "/v1/exclusions", {
        "kind": "project" if args.project else "path", "value": target, "purge": args.purge})
    return data, render_exclusion


def render_exclusion(d: dict[str, Any]) -> str:
    out = [f"excluded {d['kind']} {d['value']}: not read from now on"]
    if d.get("patterns"):
        out.append("  patterns: " + ", ".join(d["patterns"]))
    if d.get("purged") is not None:
        p = d["purged"]
        out.append(f"purged {p['units']} turns in {p['sessions']} sessions")
    return "\n".join(out)


def render_exclusions(d: dict[str, Any]) -> str:
    rows = d["exclusions"]
    if not rows:
        return "no exclusions (besides [watch] exclude in the config)"
    return "\n".join(f"{time.strftime('%Y-%m-%d', time.localtime(x['created_at']))}  "
                     f"{x['kind']:<8} {x['value']}" for x in rows)


COMMANDS = {"served": cmd_served, "export": cmd_export, "forget": cmd_forget,
            "exclude": cmd_exclude}
