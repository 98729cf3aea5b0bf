#!/usr/bin/env python3
"""memoryd's context for a nanobot agent, as a static buffer.

nanobot re-sends its session's messages on every turn and puts its workspace's bootstrap
files (AGENTS.md, USER.md, ...) in the system prompt. This script asks memoryd, over its
Unix socket, for the session's rolling summary plus the messages after it
(`GET /v1/sessions/{id}/summary`) and, with --query, what memoryd recalls from every other
agent (`POST /v1/context`), and renders them as one Markdown block. With --into FILE it
replaces only the block between the memoryd markers in that file (creating the markers
at the end the first time), so the rest of the file stays the user's.

Standard library only; talks to memoryd through its HTTP API, the stable contract.

    memoryd_buffer.py --workspace ~/.nanobot/workspace --key cli:direct --into AGENTS.md
    memoryd_buffer.py --session-id workspace/sessions/cli_direct --recent 10
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote, urlencode

START, END = "<!-- memoryd:start -->", "<!-- memoryd:end -->"


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float = 10.0) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def call(sock: str, method: str, path: str, body: dict | None = None) -> dict:
    conn = UnixConnection(sock)
    try:
        payload = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=payload,
                     headers={"Content-Type": "application/json"} if payload else {})
        resp = conn.getresponse()
        data = json.loads(resp.read() or b"{}")
    finally:
        conn.close()
    if resp.status >= 400:
        err = data.get("error", {})
        raise LookupError(f"memoryd: {err.get('message', resp.status)}")
    return data


def default_socket() -> str:
    if os.environ.get("MEMORYD_SOCKET"):
        return os.environ["MEMORYD_SOCKET"]
    if os.environ.get("MEMORYD_HOME"):
        return str(Path(os.environ["MEMORYD_HOME"]) / "run" / "memoryd.sock")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return str(Path(runtime) / "memoryd" / "memoryd.sock")
    return str(Path.home() / ".local" / "state" / "memoryd" / "memoryd.sock")


def find_session(sock: str, workspace: str, key: str) -> str | None:
    """memoryd's id for nanobot's session `key` in `workspace` (its title is the key,
    its project the workspace)."""
    query = urlencode({"agent": "nanobot", "project": workspace, "limit": 1000})
    for s in call(sock, "GET", f"/v1/sessions?{query}")["sessions"]:
        if s["title"] == key:
            return s["session_id"]
    return None


def render(summary: dict | None, recalled: str) -> str:
    parts = [START, "## Memory from memoryd", ""]
    if summary is not None:
        if summary.get("summary"):
            parts += ["### This conversation so far (summary)", "",
                      summary["summary"].strip(), ""]
        if summary.get("recent"):
            parts += [f"### Since then ({summary['recent_total']} messages; the latest "
                      f"{len(summary['recent'])})", ""]
            for m in summary["recent"]:
                text = " ".join((m.get("one_liner") or m["content"]).split())
                parts.append(f"- {m['role']}: {text[:300]}")
            parts.append("")
    if recalled:
        parts += ["### Recalled from other sessions and agents", "", recalled.strip(), ""]
    if len(parts) == 3:
        parts += ["(nothing yet)", ""]
    parts.append(END)
    return "\n".join(parts) + "\n"


def write_into(path: Path, block: str) -> None:
    """Replace the marked block (or append it), atomically, leaving the rest as it is."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if START in old and END in old:
        head, rest = old.split(START, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        new = head + block + tail
    else:
        new = old + ("\n" if old and not old.endswith("\n") else "") + block
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(new)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", default=default_socket())
    p.add_argument("--workspace", help="nanobot's workspace (default ~/.nanobot/workspace)")
    p.add_argument("--key", default="cli:direct", help="nanobot's session key")
    p.add_argument("--session-id", help="memoryd's session id (instead of --key)")
    p.add_argument("--recent", type=int, default=8, help="messages after the summary")
    p.add_argument("--query", help="also recall what memoryd knows about this")
    p.add_argument("--budget", type=int, default=800, help="tokens for --query's recall")
    p.add_argument("--into", type=Path, help="update the marked block in this file")
    args = p.parse_args(argv)
    workspace = str(Path(args.workspace or Path.home() / ".nanobot" / "workspace")
                    .expanduser().absolute())
    try:
        sid = args.session_id or find_session(args.socket, workspace, args.key)
        summary = None
        if sid:
            summary = call(args.socket, "GET", f"/v1/sessions/{quote(sid)}/summary?"
                           + urlencode({"agent": "nanobot", "recent": args.recent}))
        recalled = ""
        if args.query:
            ctx = call(args.socket, "POST", "/v1/context", {
                "query": args.query, "agent": "nanobot", "cwd": workspace,
                "budget_tokens": args.budget, "include": ["long_term", "recalled"],
                "client": "nanobot"})
            recalled = ctx.get("rendered", "")
    except (OSError, LookupError) as e:
        print(f"memoryd_buffer: {e}", file=sys.stderr)
        return 1
    block = render(summary, recalled)
    if args.into:
        write_into(args.into, block)
    else:
        sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
