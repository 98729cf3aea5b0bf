"""memoryctl's entry point: `context`, `hook` and `status` answered without argparse.

An agent's hook runs `memoryctl hook` (or `memoryctl context`) on every prompt, so the
whole process is on the prompt's path. Most of it is Python's start and imports:
argparse (with re, gettext, enum), json (re), socket (enum), pathlib (re, urllib) and
memoryctl's ~40 subparsers. This module imports none of them for the common forms of
those two commands: it reads their few flags by hand, asks for the rendered block as
text (`format=md`: no JSON to decode), writes the request's JSON itself (strings and
integers only) and talks HTTP on a bare `_socket`. Anything else (other commands,
`--help`, `--json`, an unknown or malformed flag) goes to `commands.main`, which
parses it with argparse as before: same errors, same exit codes. `status` asks the
daemon for its status rendered as text (`format=text`, by the same `render_status` the
argparse path calls), so this process decodes no JSON either.
"""

import os
import sys

from memoryd.cli.exits import (
    EXIT_ERROR,
    EXIT_NOT_RUNNING,
    EXIT_OK,
    EXIT_USAGE,
    closed_stdout,
    stdout_closed,
)
from memoryd.cli.locate import socket_path

TYPE_CHECKING = False  # typing costs ~6 ms to import; annotations are strings here
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

GLOBAL = {"--socket": "socket", "--home": "home"}
CONTEXT = {"--session": "session_id", "--cwd": "cwd", "--agent": "agent",
           "--budget": "budget", "--format": "format", "--include": "include"}
HOOK = {"--budget": "budget"}
HOOK_AGENTS = ("claude-code",)


def main(argv: "Sequence[str] | None" = None) -> int:
    """The console script. A reader that leaves early (`| head`) ends memoryctl quietly
    with EXIT_CLOSED_STDOUT; it is not the daemon's fault and says nothing about it."""
    try:
        code = dispatch(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        if not stdout_closed():
            raise
        return closed_stdout()
    return code


def dispatch(argv: "Sequence[str] | None" = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    got = parse(args)
    if got is not None:
        if got["command"] == "hook":
            return hook(got)
        if got["command"] == "status":
            return status(got)
        return context(got)
    from memoryd.cli.commands import main as full

    return full(args)


def parse(argv: "list[str]") -> "dict[str, Any] | None":
    """The options of `[--socket S] [--home H] context|hook|status ...`, or None for
    anything this module leaves to argparse."""
    out: "dict[str, Any]" = {"words": []}
    i = 0
    while i < len(argv) and argv[i] in GLOBAL:  # options before the command
        if i + 1 >= len(argv):
            return None
        out[GLOBAL[argv[i]]] = argv[i + 1]
        i += 2
    if i >= len(argv) or argv[i] not in ("context", "hook", "status"):
        return None
    out["command"] = cmd = argv[i]
    if cmd == "status":  # --watch, --json, --help and the rest: argparse's
        return out if i + 1 == len(argv) else None
    flags = CONTEXT if cmd == "context" else HOOK
    rest = argv[i + 1:]
    j = 0
    while j < len(rest):
        a = rest[j]
        if a == "--":
            out["words"] += rest[j + 1:]
            break
        if a.startswith("-") and a != "-":
            if a not in flags or j + 1 >= len(rest):
                return None  # --help, --json, --flag=value, abbreviations: argparse's
            out[flags[a]] = rest[j + 1]
            j += 2
            continue
        out["words"].append(a)
        j += 1
    if "budget" in out:
        try:
            out["budget"] = int(out["budget"])
        except ValueError:
            return None
    if cmd == "context":
        if out.get("format", "md") != "md":
            return None
    elif len(out["words"]) != 1 or out["words"][0] not in HOOK_AGENTS:
        return None
    return out


def context(opts: "dict[str, Any]") -> int:
    cwd = os.path.abspath(opts.get("cwd") or os.getcwd())
    body = {"query": " ".join(opts["words"]) or None, "session_id": opts.get("session_id"),
            "cwd": cwd, "agent": opts.get("agent"), "budget_tokens": opts.get("budget", 2000),
            "include": opts.get("include"), "client": "memoryctl", "format": "md"}
    path = socket_path(opts.get("socket"), opts.get("home"))
    try:
        status, text = post_context(path, body, timeout=30.0)
    except UnicodeEncodeError:  # an argument that is not text (undecodable bytes)
        from memoryd.cli.commands import main as full

        return full(["--socket", path, "context", *_context_argv(opts)])
    except OSError as e:
        return _no_daemon(path, e)
    if status >= 400:
        return _api_error(status, text)
    if text:
        sys.stdout.write(text + "\n")
    return EXIT_OK


def _context_argv(opts: "dict[str, Any]") -> "list[str]":
    out = []
    for flag, key in CONTEXT.items():
        if key in opts:
            out += [flag, str(opts[key])]
    return [*out, "--", *opts["words"]]


def hook(opts: "dict[str, Any]") -> int:
    """Claude Code SessionStart / UserPromptSubmit: whatever goes wrong (no daemon, bad
    input), print nothing and exit 0 so the agent carries on without memory."""
    try:
        import json

        event = json.load(sys.stdin)
        prompt = event.get("prompt") if event.get("hook_event_name") == "UserPromptSubmit" \
            else None
        body = {"query": prompt, "session_id": event.get("session_id"),
                "agent": opts["words"][0], "cwd": event.get("cwd") or os.getcwd(),
                "budget_tokens": opts.get("budget", 1500), "client": "hook", "format": "md"}
        path = socket_path(opts.get("socket"), opts.get("home"))
        status, text = post_context(path, {k: v for k, v in body.items() if v}, timeout=5.0)
        if status >= 400:
            raise RuntimeError(f"memoryd answered {status}: {text[:200]}")
        if text:
            sys.stdout.write(text + "\n")
    except Exception as e:  # fail open: memory is a bonus, never a blocker
        if os.environ.get("MEMORYD_HOOK_DEBUG"):
            print(f"memoryctl hook: {e}", file=sys.stderr)
    return EXIT_OK


def status(opts: "dict[str, Any]") -> int:
    """`memoryctl status`: the daemon renders it (`GET /v1/status?format=text`)."""
    path = socket_path(opts.get("socket"), opts.get("home"))
    try:
        code, ctype, text = exchange(path, "GET", "/v1/status?format=text", None,
                                     timeout=30.0)
    except OSError as e:
        return _no_daemon(path, e)
    if code >= 400:
        return _api_error(code, text)
    if not ctype.startswith("text/plain"):  # a daemon from before format=text: JSON
        from memoryd.cli.commands import main as full

        return full(["--socket", path, "status"])
    sys.stdout.write(text + "\n")
    return EXIT_OK


def post_context(path: str, body: "dict[str, Any]", timeout: float) -> "tuple[int, str]":
    """POST /v1/context over the Unix socket: (status, body as text)."""
    code, _, text = exchange(path, "POST", "/v1/context", encode(body).encode("utf-8"),
                             timeout)
    return code, text


def exchange(path: str, method: str, target: str, payload: "bytes | None",
             timeout: float) -> "tuple[int, str, str]":
    """One request over the Unix socket: (status, content type, body as text)."""
    from memoryd.client import _exchange, open_unix  # on _socket (socket.py imports enum)

    s = open_unix(path, timeout)  # waits out a full queue; refuses another user's socket
    try:
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        resp = _exchange(s, method, target, headers, payload)
    finally:
        s.close()
    return (resp.status, resp.headers.get("content-type", ""),
            resp.body.decode("utf-8", "replace"))


def encode(body: "dict[str, Any]") -> str:
    """JSON of a flat object of strings and integers (None left out)."""
    parts = []
    for k, v in body.items():
        if v is None:
            continue
        parts.append(_string(k) + ":" + (str(v) if isinstance(v, int) else _string(v)))
    return "{" + ",".join(parts) + "}"


def _string(s: str) -> str:
    s = s.replace("\\", "\\\\").replace('"', '\\"')
    if any(c < " " for c in s):  # control characters, as JSON requires
        s = "".join(c if c >= " " else f"\\u{ord(c):04x}" for c in s)
    return '"' + s + '"'


def _no_daemon(path: str, e: OSError) -> int:
    import errno

    from memoryd.client import DaemonNotRunning

    if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ECONNREFUSED):
        from pathlib import Path

        err = DaemonNotRunning(Path(path), stale=e.errno == errno.ECONNREFUSED)
        print(f"memoryctl: {err}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    print(f"memoryctl: cannot talk to memoryd at {path}: {e}", file=sys.stderr)
    return EXIT_ERROR


def _api_error(status: int, text: str) -> int:
    import json

    try:
        err = json.loads(text).get("error", {})
    except (ValueError, AttributeError):
        err = {}
    where = f" ({err['field']})" if err.get("field") else ""
    print(f"memoryctl: {err.get('message', text)}{where}", file=sys.stderr)
    return EXIT_USAGE if status == 400 else EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
