"""`memoryctl`: administer a running memoryd. Starts fast: it imports only the
standard library, `memoryd.client` and `memoryd.paths` (never litellm, the store or
the watcher)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from memoryd import __version__
from memoryd.cli import output
from memoryd.client import ApiError, DaemonNotRunning, MemorydClient

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_MISMATCH = 0, 1, 2, 3, 4


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memoryctl", description="Administer memoryd.")
    p.add_argument("--socket", help="daemon socket (default: from MEMORYD_SOCKET or the home)")
    p.add_argument("--home", help="the MEMORYD_HOME of the daemon to talk to")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--version", action="version", version=f"memoryctl {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    sub.add_parser("status", help="is the daemon up, what has it read")
    s = sub.add_parser("search", help="full-text search over every transcript")
    s.add_argument("query", nargs="+")
    s.add_argument("--mode", choices=["or", "and"], default="or")
    s.add_argument("-n", "--max-results", type=int, default=15)
    s.add_argument("--agent")
    s.add_argument("--project")
    s.add_argument("--session", dest="session_id")
    ss = sub.add_parser("sessions", help="list sessions")
    ss.add_argument("action", nargs="?", choices=["list"], default="list")
    ss.add_argument("--agent")
    ss.add_argument("--project")
    ss.add_argument("--limit", type=int, default=50)
    return p


def socket_path(args: argparse.Namespace) -> Path:
    if args.socket:
        return Path(args.socket)
    if os.environ.get("MEMORYD_SOCKET"):
        return Path(os.environ["MEMORYD_SOCKET"])
    from memoryd.paths import resolve_paths

    paths = resolve_paths(args.home)
    configured = _configured_socket(paths.config_file)
    return configured or paths.socket


def _configured_socket(config: Path) -> Path | None:
    import tomllib

    try:
        with open(config, "rb") as f:
            sock = tomllib.load(f).get("server", {}).get("socket")
    except (OSError, ValueError):
        return None
    return Path(sock).expanduser() if isinstance(sock, str) else None


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    client = MemorydClient(socket_path(args))
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
        print(f"memoryctl: cannot talk to memoryd at {client.socket_path}: {e}", file=sys.stderr)
        return EXIT_ERROR


def run(args: argparse.Namespace, client: MemorydClient) -> int:
    if args.command == "status":
        data = client.status()
        render = output.render_status
    elif args.command == "search":
        data = client.search(query=" ".join(args.query), mode=args.mode,
                             max_results=args.max_results, agent=args.agent,
                             project=args.project, session_id=args.session_id)
        render = output.render_search
    elif args.command == "sessions":
        data = client.sessions(agent=args.agent, project=args.project, limit=args.limit)
        render = output.render_sessions
    else:  # pragma: no cover - argparse rejects unknown commands
        return EXIT_USAGE
    if args.json:
        output.emit_json(data)
    else:
        print(render(data))
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
