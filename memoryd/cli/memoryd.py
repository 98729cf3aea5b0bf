"""`memoryd`: run the daemon in the foreground."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memoryd import __version__

EXIT_OK, EXIT_CRASH, EXIT_CONFIG, EXIT_STARTUP = 0, 1, 2, 3


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memoryd", description=(
        "Local memory service for AI agents: watches their transcripts, keeps them "
        "searchable and answers context requests."))
    p.add_argument("--config", type=Path, help="config file (default: <config dir>/config.toml)")
    p.add_argument("--home", help="keep all state under this directory (like MEMORYD_HOME)")
    p.add_argument("--source", action="append", default=[], metavar="AGENT=PATH",
                   help="watch PATH as AGENT (a format name or 'auto'); may repeat")
    p.add_argument("--no-default-sources", action="store_true",
                   help="do not watch the agents' default locations")
    p.add_argument("--socket", help="Unix socket path")
    tcp = p.add_mutually_exclusive_group()
    tcp.add_argument("--port", type=int, help="TCP port on 127.0.0.1 (0: any free port)")
    tcp.add_argument("--no-tcp", action="store_true", help="serve only the Unix socket")
    p.add_argument("--store", metavar="URL",
                   help="the store: 'sqlite' (default) or postgresql://user@host/db, "
                        "shared by a fleet of daemons ([store] url); no password here: "
                        "[store] password_file, PGPASSWORD or ~/.pgpass")
    p.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   type=str.upper)
    p.add_argument("--version", action="version", version=f"memoryd {__version__}")
    return p


def overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    from memoryd.config import parse_source

    out: dict[str, dict[str, Any]] = {}
    if args.source:
        out.setdefault("watch", {})["sources"] = [parse_source(s) for s in args.source]
    if args.no_default_sources:
        out.setdefault("watch", {})["default_sources"] = False
    if args.socket:
        out.setdefault("server", {})["socket"] = args.socket
    if args.port is not None:
        out.setdefault("server", {})["tcp_port"] = args.port
    if args.no_tcp:
        out.setdefault("server", {})["tcp_enabled"] = False
    if args.log_level:
        out.setdefault("log", {})["level"] = args.log_level
    if args.store is not None:
        from memoryd.errors import ConfigError
        from memoryd.store_target import refuse_password_in_flag

        try:
            refuse_password_in_flag(args.store, "--store")
        except ValueError as e:
            raise ConfigError(str(e)) from None
        out.setdefault("store", {})["url"] = args.store
    return out


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop (libuv, in C) where it is installed: the loop's own work per
    request (its iterations, the socket transports, callbacks) is most of the event loop
    thread's CPU per search or context request (bench/loop_cpu.py). `MEMORYD_LOOP=asyncio`
    keeps the standard library's loop."""
    if os.environ.get("MEMORYD_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # a platform without it: the standard loop
        return None
    return uvloop.new_event_loop


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from memoryd.config import load_settings
    from memoryd.daemon import Daemon
    from memoryd.errors import AlreadyRunningError, ConfigError, StoreError
    from memoryd.log import configure_logging
    from memoryd.paths import SocketPathTooLong, resolve_paths

    paths = resolve_paths(args.home)
    notes: list[str] = []
    config = args.config or (Path(os.environ["MEMORYD_CONFIG"])
                             if os.environ.get("MEMORYD_CONFIG") else paths.config_file)
    try:
        if args.config and not args.config.exists():
            raise ConfigError(f"{args.config}: no such config file")
        settings = load_settings(config, os.environ, overrides(args), notes=notes)
    except ConfigError as e:
        print(f"memoryd: bad configuration: {e}", file=sys.stderr)
        return EXIT_CONFIG
    os.umask(0o077)  # everything memoryd creates (db, logs, backups, memory files) is private
    configure_logging(settings.log.level, paths.log_file if settings.log.file else None)
    log = logging.getLogger("memoryd")
    log.info("config: %s", config if config.exists() else "defaults (no config file)")
    for note in notes:  # a setting memoryd no longer reads (memoryd.config.REMOVED)
        log.warning("config: %s", note)
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            return runner.run(Daemon(settings, paths, load_settings=lambda: load_settings(
                config, os.environ, overrides(args))).run())
    except ConfigError as e:
        print(f"memoryd: bad configuration: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except (AlreadyRunningError, StoreError, SocketPathTooLong) as e:
        print(f"memoryd: cannot start: {e}", file=sys.stderr)
        return EXIT_STARTUP
    except OSError as e:
        hint = ""
        if e.errno == errno.EADDRINUSE:
            hint = ("; another program uses that TCP port: pick a free one with `--port 0`, "
                    "or serve only the Unix socket with `--no-tcp` ([server] tcp_port / "
                    "tcp_enabled in the config)")
        print(f"memoryd: cannot start: {e}{hint}", file=sys.stderr)
        return EXIT_STARTUP
    except KeyboardInterrupt:
        return EXIT_OK


def run() -> None:
    """The `memoryd` command: `main`, then out at once. By the time `main` returns, the
    daemon has stopped and closed everything it holds (the store committed, the index
    closed, the socket removed); the interpreter's own teardown after that, freeing every
    module and object one by one, took 0.5-2 s of CPU (6.6 s on a loaded machine, where
    systemd or a test waits for the process to go). The logs are flushed, then the
    process ends without it."""
    code = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
