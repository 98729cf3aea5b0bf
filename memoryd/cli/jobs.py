"""`memoryctl jobs [--follow]` and `memoryctl run ... --wait`: the job queue as the
user sees it. Standard library and `memoryd.client` only."""

from __future__ import annotations

import argparse
import time

from memoryd.cli import output
from memoryd.client import MemorydClient

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EXIT_OK, EXIT_ERROR = 0, 1
POLL_S = 1.0
# `memoryctl run --list`: what each job the daemon offers does, and the flags it takes
ABOUT = {
    "consolidate": "a day's sessions into its daily note and MEMORY.md "
                   "(--date D, or --since D [--until D]; --dry-run)",
    "idle_sweep": "summarize the sessions that went quiet (on its own every 60 s by default)",
    "one_liners": "a one-line gist of each message of a session (--session ID)",
    "reconcile": "look for new and grown transcripts now (on its own every 30 s by default)",
    "reindex": "rebuild the search index from the database, in the background",
    "resume_llm": "use the LLM again after it was paused (budget, errors)",
    "retention": "fold old daily notes into HISTORY.md, archive old sessions (--dry-run)",
    "summarize": "summarize a session now (--session ID), or every one with a backlog",
    "upgrade": "redo extractive summaries with the LLM, now that one is reachable",
}


def add_parsers(sub: Any) -> None:
    j = sub.add_parser("jobs", help="pending, running and failed jobs, with reasons")
    j.add_argument("--state", choices=["pending", "running", "done", "failed"])
    j.add_argument("--kind")
    j.add_argument("-f", "--follow", action="store_true",
                   help="keep printing jobs as they change (Ctrl-C stops)")
    j.add_argument("--for", dest="follow_s", type=float, metavar="SECONDS",
                   help="with --follow: stop after this many seconds")


def _line(j: dict[str, Any]) -> str:
    target = (f"{j['agent']} {j['session_id']}" if j.get("session_id")
              else j["target"] or "-")
    why = j.get("last_error") if j["state"] == "failed" else j.get("reason")
    tries = f" try {j['attempts']}" if j.get("attempts") else ""
    return (f"#{j['id']:<6} {j['state']:<8} {j['kind']:<12} {target:<40} "
            f"{output.when(j['updated_at'])}{tries}" + (f"  ({why})" if why else ""))


def render_jobs(d: dict[str, Any]) -> str:
    c = d["counts"]
    head = (f"{c.get('pending', 0)} pending, {c.get('running', 0)} running, "
            f"{c.get('done', 0)} done, {c.get('failed', 0)} failed")
    return "\n".join([head, *(_line(j) for j in d["jobs"])])


def cmd_jobs(args: argparse.Namespace, c: MemorydClient) -> Any:
    query = {"state": args.state, "kind": args.kind}
    data = c.request("GET", "/v1/jobs/queue", query=query)
    if not args.follow:
        return data, render_jobs
    print(render_jobs(data), flush=True)
    seen = {j["id"]: (j["state"], j["attempts"]) for j in data["jobs"]}
    deadline = None if args.follow_s is None else time.monotonic() + args.follow_s
    try:
        while deadline is None or time.monotonic() < deadline:
            time.sleep(POLL_S if deadline is None else
                       max(0.0, min(POLL_S, deadline - time.monotonic())))
            data = c.request("GET", "/v1/jobs/queue", query={**query, "done": 20})
            for j in reversed(data["jobs"]):
                key = (j["state"], j["attempts"])
                if seen.get(j["id"]) != key:
                    seen[j["id"]] = key
                    print(time.strftime("%H:%M:%S ") + _line(j), flush=True)
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def wait_job(c: MemorydClient, job_id: int, timeout: float = 300.0) -> dict[str, Any]:
    c.timeout = max(c.timeout, timeout + 5)
    return c.request("GET", f"/v1/jobs/{job_id}", query={"wait": "true", "timeout": timeout})


def render_list(d: dict[str, Any]) -> str:
    names = d["jobs"]
    if not names:
        return "no jobs"
    width = max(len(n) for n in names)
    return "\n".join(f"{n:<{width}}  {ABOUT.get(n, '')}".rstrip() for n in names)


def render_run(d: dict[str, Any]) -> str:
    """`memoryctl run`: the job id first (so it can be followed), then the result."""
    res = d["result"] if isinstance(d.get("result"), dict) else {}
    job = d.get("waited")
    if job is not None:
        detail = ", ".join(f"{k}={v}" for k, v in (job.get("result") or {}).items())
        err = f": {job['last_error']}" if job["state"] == "failed" else ""
        return f"{d['job']}: job #{job['id']} {job['state']}{err}" + (
            f" ({detail})" if detail else "")
    if "job_id" in res:
        rest = ", ".join(f"{k}={v}" for k, v in res.items() if k not in ("job_id", "state"))
        return (f"{d['job']}: job #{res['job_id']} {res.get('state', 'queued')}"
                + (f" ({rest})" if rest else "")
                + ("" if res.get("state") in ("done", "failed") else
                   "; follow it with `memoryctl jobs -f` or wait with --wait"))
    return output.render_job(d)


COMMANDS = {"jobs": cmd_jobs}
