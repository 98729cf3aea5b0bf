"""`memoryctl`: administer a running memoryd.

Starts fast: the commands that talk to the daemon import only the standard library,
`memoryd.client` and `memoryd.paths` (never litellm, the store or the watcher); the
local commands (`config`, `doctor`, `mcp`) import what they need when they run.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from memoryd import __version__
from memoryd.cli import consolidation, evaluation, history, jobs, locate, output, store
from memoryd.cli.exits import (
    EXIT_ERROR,
    EXIT_NOT_RUNNING,
    EXIT_OK,
    EXIT_USAGE,
    stdout_closed,
)
from memoryd.client import ApiError, DaemonNotRunning, MemorydClient

RANGE_TIMEOUT_S = 3600.0  # `run consolidate --since`: the daemon answers once every day is done

# argparse translates its fixed strings ("options", "show this help message and exit")
# through gettext on every parser and argument it makes, and gettext looks for catalogue
# files on disk each time without remembering it found none: two thirds of building
# memoryctl's ~40 subparsers, paid on every hook call. The locale does not change within
# one run, so each string is looked up once.
argparse._ = functools.cache(argparse._)  # type: ignore[attr-defined]

TYPE_CHECKING = False  # typing costs ~6 ms to import; annotations are strings
if TYPE_CHECKING:
    from typing import Any


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memoryctl", description="Administer memoryd.")
    p.add_argument("--socket", help="daemon socket (default: $MEMORYD_SOCKET, or the home's)")
    p.add_argument("--home", help="the MEMORYD_HOME of the daemon to talk to")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--version", action="version", version=f"memoryctl {__version__}")
    # --json is accepted after the command too (`memoryctl search x --json`)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="machine-readable output")
    sub = p.add_subparsers(dest="command", metavar="COMMAND",
                           parser_class=_with_parents(common))
    sub.required = True

    st = sub.add_parser("status", help="is the daemon up, what has it read")
    st.add_argument("--watch", action="store_true",
                    help="a live progress bar of the backfill until caught up")
    st.add_argument("--interval", type=float, default=1.0, help="--watch refresh (seconds)")
    s = sub.add_parser("search", help="full-text search over every transcript")
    s.add_argument("query", nargs="+")
    s.add_argument("--mode", choices=["or", "and"], default="or")
    s.add_argument("-n", "--max-results", type=int, default=15)
    s.add_argument("--agent")
    s.add_argument("--project")
    s.add_argument("--session", dest="session_id")

    cx = sub.add_parser("context", help="what an agent should remember for QUERY")
    cx.add_argument("query", nargs="*")
    cx.add_argument("--session", dest="session_id")
    cx.add_argument("--cwd", help="the agent's working directory (default: this one)")
    cx.add_argument("--agent")
    cx.add_argument("--budget", type=int, default=2000, help="tokens (default 2000)")
    cx.add_argument("--format", choices=["md", "json"], default="md")
    cx.add_argument("--include", help="comma list: long_term,session_summary,recalled,daily")
    hk = sub.add_parser("hook", help="an agent hook: reads the hook's JSON on stdin, prints "
                                     "context (never fails the agent)")
    hk.add_argument("agent", choices=["claude-code"])
    hk.add_argument("--budget", type=int, default=1500)

    ss = sub.add_parser("sessions", help="list, show or forget sessions")
    sss = ss.add_subparsers(dest="action", metavar="ACTION")
    ls = sss.add_parser("list", help="sessions, newest first")
    for a in (ss, ls):
        a.add_argument("--agent")
        a.add_argument("--project")
        a.add_argument("--since", help="ISO date/time or Unix seconds")
        a.add_argument("--limit", type=int, default=50)
    show = sss.add_parser("show", help="one session and its messages")
    show.add_argument("id", help="session id, or a unique prefix of it")
    show.add_argument("--agent")
    show.add_argument("--machine", help="in a fleet: the machine whose session it is")
    show.add_argument("--messages", type=int, default=20, help="how many messages to print")
    fg = sss.add_parser("forget", help="delete a session everywhere")
    fg.add_argument("id")
    fg.add_argument("--agent")
    fg.add_argument("--machine", help="in a fleet: the machine whose session it is")
    fg.add_argument("--yes", action="store_true", help="do not ask")

    m = sub.add_parser("memory", help="the long-term memory file (MEMORY.md)")
    ms = m.add_subparsers(dest="action", metavar="ACTION")
    ms.required = True
    ms.add_parser("show", help="print MEMORY.md with line numbers")
    add = ms.add_parser("add", help="add an entry (items separated by '；' or newlines)")
    add.add_argument("content", nargs="+")
    add.add_argument("--source", default="manual")
    rm = ms.add_parser("rm", help="delete entries by line number")
    rm.add_argument("lines", nargs="+", type=int)
    rc = ms.add_parser("recent", help="the newest entries")
    rc.add_argument("-n", "--count", type=int, default=10)
    ms.add_parser("stats", help="entries per source, date range")
    se = ms.add_parser("search", help="entries containing keywords")
    se.add_argument("keywords", nargs="+")
    se.add_argument("--mode", choices=["or", "and"], default="or")
    se.add_argument("-n", "--max-results", type=int, default=15)
    ms.add_parser("edit", help="open MEMORY.md in $EDITOR; replace it if changed")

    r = sub.add_parser("run", help="run a job now (see `memoryctl run --list`)")
    r.add_argument("job", nargs="?")
    r.add_argument("--list", action="store_true", help="list the jobs")
    r.add_argument("--session", help="session id, for session jobs")
    r.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    consolidation.add_parsers(sub, r, ms, sss, s)
    sub.add_parser("reindex", help="rebuild the search index from the database, in the "
                   "background (search scans recent units meanwhile)")
    r.add_argument("--wait", action="store_true", help="return once the job is done")
    ing = sub.add_parser("ingest", help="read a file or folder now")
    ing.add_argument("path")
    ing.add_argument("--agent", default="auto")
    ing.add_argument("--wait", action="store_true", help="return once it has been read")

    cfg = sub.add_parser("config", help="show, locate, print or check the configuration")
    cfg.add_argument("action", choices=["show", "path", "default", "check"])
    cfg.add_argument("--config", type=Path, help="config file (default: the home's)")
    lg = sub.add_parser("logs", help="the daemon's log")
    lg.add_argument("-f", "--follow", action="store_true")
    lg.add_argument("-n", "--lines", type=int, default=50)
    sub.add_parser("version", help="client and daemon versions")
    b = sub.add_parser("backup", help="a consistent copy of the database")
    b.add_argument("file")
    sub.add_parser("doctor", help="check config, dirs, permissions, socket, sources, LLM")
    sub.add_parser("mcp", help="serve the memory tools over MCP (stdio)")
    op = sub.add_parser("open", help="open the web page (prints a one-time login link)")
    op.add_argument("--no-browser", action="store_true", help="only print the link")
    history.add_parsers(sub)
    jobs.add_parsers(sub)
    evaluation.add_parsers(sub)
    store.add_parsers(sub)
    sv = sub.add_parser("service", help="run memoryd as a systemd user service / LaunchAgent")
    sv.add_argument("action", choices=["install", "uninstall", "status"])
    sv.add_argument("--dry-run", action="store_true",
                    help="print the file and the systemctl/launchctl commands; change nothing")
    return p


def _with_parents(common: argparse.ArgumentParser) -> type[argparse.ArgumentParser]:
    class Parser(argparse.ArgumentParser):
        def __init__(self, **kw: Any) -> None:
            kw.setdefault("parents", [common])
            super().__init__(**kw)

    return Parser


def socket_path(args: argparse.Namespace) -> Path:
    return Path(locate.socket_path(args.socket, args.home))


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    local = LOCAL.get(args.command)
    if local is not None:
        from memoryd.cli import admin

        return int(getattr(admin, local)(args))
    if args.command == "store":
        return store.main(args)
    client = MemorydClient(socket_path(args))
    if args.command == "hook":
        return int(cmd_hook(args, client))  # type: ignore[arg-type]
    try:
        return run(args, client)
    except DaemonNotRunning as e:
        print(f"memoryctl: {e}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    except ApiError as e:
        where = f" ({e.field})" if e.field else ""
        print(f"memoryctl: {e.message}{where}", file=sys.stderr)
        return EXIT_USAGE if e.status == 400 else EXIT_ERROR
    except (OSError, TimeoutError) as e:
        if isinstance(e, BrokenPipeError) and stdout_closed():
            raise  # the reader of our output left (`| head`): memoryctl.main ends quietly
        print(f"memoryctl: cannot talk to memoryd at {client.socket_path}: {e}", file=sys.stderr)
        return EXIT_ERROR


# commands that run in this process without (necessarily) a daemon: name -> admin function
LOCAL = {"config": "config", "logs": "logs", "version": "version", "doctor": "doctor",
         "mcp": "mcp", "service": "service"}


def run(args: argparse.Namespace, client: MemorydClient) -> int:
    handler = COMMANDS[args.command]
    result = handler(args, client)
    if isinstance(result, int):
        return result
    data, render = result
    if args.json:
        output.emit_json(data)
    else:
        print(render(data))
    return EXIT_OK


Result = "int | tuple[Any, Callable[[Any], str]]"  # a string: typing is not imported


def cmd_status(args: argparse.Namespace, c: MemorydClient) -> Result:
    if args.watch and not args.json:
        from memoryd.cli.progress import watch

        return watch(c, max(0.1, args.interval))
    return c.status(), output.render_status


def cmd_search(args: argparse.Namespace, c: MemorydClient) -> Result:
    if args.archive:
        found = consolidation.archive_search(c, " ".join(args.query), args.max_results,
                                             args.agent)
        return found  # type: ignore[no-any-return]
    data = c.search(query=" ".join(args.query), mode=args.mode, max_results=args.max_results,
                    agent=args.agent, project=args.project, session_id=args.session_id)
    return data, output.render_search


def cmd_context(args: argparse.Namespace, c: MemorydClient) -> Result:
    body = {"query": " ".join(args.query) or None, "session_id": args.session_id,
            "cwd": str(Path(args.cwd or os.getcwd()).absolute()), "agent": args.agent,
            "budget_tokens": args.budget, "include": args.include, "client": "memoryctl"}
    data = c.request("POST", "/v1/context", {k: v for k, v in body.items() if v is not None})
    if args.format == "json" or args.json:
        output.emit_json(data)
    elif data["rendered"]:
        print(data["rendered"])
    return EXIT_OK


def cmd_hook(args: argparse.Namespace, c: MemorydClient) -> Result:
    """Claude Code SessionStart / UserPromptSubmit: whatever goes wrong (no daemon, bad
    input), print nothing and exit 0 so the agent carries on without memory."""
    import json

    try:
        event = json.load(sys.stdin)
        prompt = event.get("prompt") if event.get("hook_event_name") == "UserPromptSubmit" \
            else None
        body = {"query": prompt, "session_id": event.get("session_id"), "agent": args.agent,
                "cwd": event.get("cwd") or os.getcwd(), "budget_tokens": args.budget,
                "client": "hook"}
        c.timeout = 5.0
        data = c.request("POST", "/v1/context", {k: v for k, v in body.items() if v})
        if data.get("rendered"):
            print(data["rendered"])
    except Exception as e:  # fail open: memory is a bonus, never a blocker
        if os.environ.get("MEMORYD_HOOK_DEBUG"):
            print(f"memoryctl hook: {e}", file=sys.stderr)
    return EXIT_OK


def cmd_sessions(args: argparse.Namespace, c: MemorydClient) -> Result:
    action = args.action or "list"
    if action == "list":
        return c.sessions(agent=args.agent, project=args.project, since=args.since,
                          limit=args.limit), output.render_sessions
    if action == "summarize":
        return consolidation.cmd_summarize(args, c)  # type: ignore[no-any-return]
    if action == "show":
        if args.messages < 0:
            print("memoryctl: --messages must be 0 or more", file=sys.stderr)
            return EXIT_USAGE
        data = c.session(args.id, args.agent, args.machine)  # resolves a unique prefix
        data["messages"] = c.messages(data["session_id"], agent=data["agent"],
                                      machine=data.get("machine"), after_seq=max(
            0, data["units"] - args.messages), limit=args.messages)["messages"] \
            if args.messages else []
        return data, output.render_session
    sid, agent = args.id, args.agent
    if not args.yes:  # name the session a prefix stands for, and forget that one
        s = c.session(sid, agent, args.machine)
        sid, agent = s["session_id"], s["agent"]
        if (no := history.refused(f"Forget {agent} session {sid} ({s['units']} units) "
                                  "everywhere? This cannot be undone [y/N] ")) is not None:
            return no
    data = c.forget(sid, agent, args.machine)
    return data, lambda d: f"forgot {d['agent']} session {d['session_id']} " \
                           + (f"of {d['machine']} " if d.get("machine") else "") + \
                           f"({d['units_deleted']} units)" + (
        f"; {len(d.get('memory_items_removed', []))} MEMORY.md items and "
        f"{len(d.get('daily_lines_removed', []))} daily-note lines "
        f"({len(d.get('history_lines_removed', []))} in HISTORY.md) only it stood behind "
        "removed" if d.get("memory_items_removed") or d.get("daily_lines_removed")
        or d.get("history_lines_removed") else "")


def cmd_memory(args: argparse.Namespace, c: MemorydClient) -> Result:
    a = args.action
    if a == "show":
        return c.memory(), output.render_memory
    if a == "add":
        data = c.memory_add(" ".join(args.content), args.source)
        return data, lambda d: (f"already there, line {d['line']}" if d.get("duplicate")
                                else f"added as line {d['line']} ({d['total']} entries)")
    if a == "rm":
        return c.memory_delete(args.lines), lambda d: f"deleted; {d['total']} entries left"
    if a == "recent":
        return c.memory_recent(args.count), output.render_memory_entries
    if a == "stats":
        return c.memory_stats(), output.render_memory_stats
    if a == "why":
        return c.request("GET", f"/v1/memory/why/{args.line}"), consolidation.render_why
    if a == "search":
        return c.memory_search(args.keywords, args.mode, args.max_results), \
            output.render_memory_search
    from memoryd.cli import admin

    return admin.edit_memory(c)


def cmd_run(args: argparse.Namespace, c: MemorydClient) -> Result:
    if args.list or not args.job:
        return c.request("GET", "/v1/jobs"), jobs.render_list
    params: dict[str, Any] = consolidation.job_params(args)
    if args.session:
        params["session_id"] = args.session
    for kv in args.param:
        k, sep, v = kv.partition("=")
        if not sep:
            print(f"memoryctl: --param {kv}: expected KEY=VALUE", file=sys.stderr)
            return EXIT_USAGE
        params[k] = v
    if "since" in params:  # a range is consolidated before the answer: days, not seconds
        c.timeout = max(c.timeout, RANGE_TIMEOUT_S)
    data = c.run_job(args.job, params)
    job_id = (data.get("result") or {}).get("job_id")
    if args.wait and job_id is not None and data["result"].get("state") not in ("done",
                                                                               "failed"):
        data["waited"] = jobs.wait_job(c, int(job_id))
    if (data.get("waited") or data.get("result") or {}).get("state") == "failed":
        print(jobs.render_run(data))
        return EXIT_ERROR
    return data, lambda d: consolidation.render_run(d) or jobs.render_run(d)


def cmd_reindex(args: argparse.Namespace, c: MemorydClient) -> Result:
    return c.run_job("reindex", {}), output.render_job


def cmd_ingest(args: argparse.Namespace, c: MemorydClient) -> Result:
    path = str(Path(args.path).expanduser().absolute())
    data = c.ingest(path, agent=args.agent, wait=args.wait)
    return data, output.render_ingest


def cmd_backup(args: argparse.Namespace, c: MemorydClient) -> Result:
    data = c.backup(str(Path(args.file).expanduser().absolute()))
    return data, lambda d: f"wrote {d['path']} ({d['bytes']} bytes)"


def cmd_open(args: argparse.Namespace, c: MemorydClient) -> Result:
    """A one-time login link minted by the daemon (over the socket), printed, and opened
    in a browser when there is a display."""
    data = c.request("POST", "/v1/web/login")
    if args.json:
        output.emit_json(data)
    else:
        print(data["url"])
        print(f"(works once, for {data['expires_in_s']} s)", file=sys.stderr)
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") \
        or sys.platform == "darwin"
    if not args.no_browser and display:
        import webbrowser

        webbrowser.open(data["url"])
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, MemorydClient], Result]] = {
    "status": cmd_status, "search": cmd_search, "context": cmd_context, "hook": cmd_hook,
    "sessions": cmd_sessions,
    "memory": cmd_memory, "run": cmd_run, "ingest": cmd_ingest, "backup": cmd_backup,
    "daily": consolidation.cmd_daily, "archive": consolidation.cmd_archive,
    "reindex": cmd_reindex,
    "open": cmd_open,
    **history.COMMANDS, **jobs.COMMANDS, **evaluation.COMMANDS,
}


if __name__ == "__main__":
    raise SystemExit(main())
