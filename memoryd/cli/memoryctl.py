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

TYPE_CHECKING = False  # typing costs ~6 ms to import; annotations are strings here
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3
# `memoryctl ... | head`: the reader left. 128 + SIGPIPE, what a shell reports for git or
# coreutils cut off the same way, so `set -o pipefail` scripts see memoryctl as they see
# any other tool, and a cut-off listing is not mistaken for a complete one.
EXIT_CLOSED_STDOUT = 141

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


def stdout_closed() -> bool:
    """True when stdout is a pipe or socket whose reader has gone: poll reports an error
    or hang-up on the writing end (Linux: POLLERR; macOS and the BSDs: POLLHUP)."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced or closed by a caller
        return False
    p = select.poll()
    p.register(fd, select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))


def closed_stdout() -> int:
    """Point stdout at /dev/null (the interpreter flushes it at exit, which would raise
    again and print a traceback) and give the exit code."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_CLOSED_STDOUT


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


def socket_path(opts: "dict[str, Any]") -> str:
    """--socket, $MEMORYD_SOCKET, the config's [server] socket, or the home's default."""
    if opts.get("socket"):
        return str(opts["socket"])
    if os.environ.get("MEMORYD_SOCKET"):
        return os.environ["MEMORYD_SOCKET"]
    got = plain_dirs(opts.get("home"), os.environ)
    if got is None:  # anything unusual: memoryd.paths decides (pathlib, platformdirs)
        from memoryd.paths import resolve_paths

        paths = resolve_paths(opts.get("home"))
        config, sock = str(paths.config_file), str(paths.socket)
    else:
        config, sock = got
    return configured_socket(config) or sock


def plain_dirs(home: "str | None", environ: "Any") -> "tuple[str, str] | None":
    """(config file, default socket) as `memoryd.paths.resolve_paths` places them, from
    strings alone, for the usual cases: a home (--home, $MEMORYD_HOME), or Linux's XDG
    defaults. None for the rest (another OS, a relative $HOME, a path Path would
    normalize), which the caller leaves to `memoryd.paths`. Importing memoryd.paths costs
    dataclasses (inspect, re), pathlib and platformdirs (tempfile, shutil, fnmatch): more
    than the rest of this process's imports together. Tested equal to resolve_paths."""
    home = home or environ.get("MEMORYD_HOME")
    if home:
        h = os.path.expanduser(home)
        h = h if h.startswith("/") else os.getcwd() + "/" + h
        return _plain(h + "/config/config.toml", h + "/run/memoryd.sock")
    if not sys.platform.startswith("linux") or hasattr(sys, "getandroidapilevel") \
            or "ANDROID_DATA" in environ or not environ.get("HOME", "/").startswith("/"):
        return None
    config = _xdg(environ, "XDG_CONFIG_HOME", "~/.config")
    state = _xdg(environ, "XDG_STATE_HOME", "~/.local/state")
    base = environ.get("XDG_RUNTIME_DIR")
    run = base + "/memoryd" if base and os.path.isdir(base) and os.access(base, os.W_OK) \
        else state
    return _plain(config + "/config.toml", run + "/memoryd.sock")


def _xdg(environ: "Any", name: str, default: str) -> str:
    base = environ.get(name, "")
    return (base if base.startswith("/") else os.path.expanduser(default)) + "/memoryd"


def _plain(config: str, sock: str) -> "tuple[str, str] | None":
    """Both paths when str(Path(p)) is the same string for each, else None."""
    for p in (config, sock):
        if not p.startswith("/") or "//" in p or "/./" in p or "/../" in p:
            return None
    return config, sock


def configured_socket(config: str) -> "str | None":
    if not os.path.exists(config):
        return None
    import tomllib

    try:
        with open(config, "rb") as f:
            sock = tomllib.load(f).get("server", {}).get("socket")
    except (OSError, ValueError):
        return None
    return os.path.expanduser(sock) if isinstance(sock, str) else None


def context(opts: "dict[str, Any]") -> int:
    cwd = os.path.abspath(opts.get("cwd") or os.getcwd())
    body = {"query": " ".join(opts["words"]) or None, "session_id": opts.get("session_id"),
            "cwd": cwd, "agent": opts.get("agent"), "budget_tokens": opts.get("budget", 2000),
            "include": opts.get("include"), "client": "memoryctl", "format": "md"}
    path = socket_path(opts)
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
        status, text = post_context(socket_path(opts), {k: v for k, v in body.items() if v},
                                    timeout=5.0)
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
    path = socket_path(opts)
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
