"""memoryctl's local commands: configuration, logs, version, doctor, editing MEMORY.md,
and the MCP bridge. Imported only when one of them runs."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memoryd import __version__
from memoryd.cli import locate
from memoryd.cli.exits import EXIT_ERROR, EXIT_MISMATCH, EXIT_NOT_RUNNING, EXIT_OK, EXIT_USAGE
from memoryd.cli.output import store_down_line
from memoryd.client import ApiError, DaemonNotRunning, MemorydClient
from memoryd.paths import Paths, resolve_paths


def _socket(args: argparse.Namespace) -> Path:
    return Path(locate.socket_path(args.socket, args.home))


def _config_file(args: argparse.Namespace, paths: Paths) -> Path:
    if getattr(args, "config", None):
        return Path(args.config)
    if os.environ.get("MEMORYD_CONFIG"):
        return Path(os.environ["MEMORYD_CONFIG"])
    return paths.config_file


def config(args: argparse.Namespace) -> int:
    from memoryd.config import ConfigError, load_settings
    from memoryd.config_doc import default_config

    paths = resolve_paths(args.home)
    path = _config_file(args, paths)
    if args.action == "path":
        print(path)
        for name in ("config_dir", "data_dir", "state_dir", "log_dir", "runtime_dir"):
            print(f"{name:<12} {getattr(paths, name)}")
        return EXIT_OK
    if args.action == "default":
        sys.stdout.write(default_config())
        return EXIT_OK
    notes: list[str] = []
    try:
        settings = load_settings(path, notes=notes)
    except ConfigError as e:
        problems = str(e).split("\n")
        if len(problems) == 1:
            print(f"memoryctl: bad configuration: {e}", file=sys.stderr)
        else:
            print(f"memoryctl: bad configuration ({len(problems)} problems):", file=sys.stderr)
            for line in problems:
                print(f"  {line}", file=sys.stderr)
        return EXIT_USAGE
    for note in notes:  # a setting memoryd no longer reads (memoryd.config.REMOVED)
        print(f"memoryctl: note: {note}", file=sys.stderr)
    if args.action == "check":
        where = path if path.exists() else "defaults (no config file)"
        print(f"ok: {where}")
        return EXIT_OK
    data = settings.model_dump(mode="json")
    if args.json:
        from memoryd.cli.output import emit_json

        emit_json(data)
    else:
        from memoryd.config_doc import as_toml

        sys.stdout.write(as_toml(data))
    return EXIT_OK


def logs(args: argparse.Namespace) -> int:
    """The log file when memoryd writes one ([log] file = true); else wherever the
    running daemon's stderr goes: a file it was started with (`memoryd 2>FILE`), the
    journal (systemd: `journalctl`), or a terminal, which is only named. With no daemon
    running, an installed unit's journal or LaunchAgent file still holds its past runs."""
    paths = resolve_paths(args.home)
    if paths.log_file.exists():
        return _tail(paths.log_file, args)
    pid = _daemon_pid(args)
    where = _stderr_of(pid) if pid is not None else None
    if where is not None and where.startswith("/") and os.path.isfile(where):
        print(f"(memoryd {pid} logs to its stderr: {where})", file=sys.stderr)
        return _tail(Path(where), args)
    from memoryd.cli import service

    unit, darwin = service.target(), service.platform() == "darwin"
    err = _launchd_log(unit) if darwin else None
    if err is not None and err.exists():
        print(f"(the LaunchAgent's log: {err})", file=sys.stderr)
        return _tail(err, args)
    # systemd hands a service's stderr to the journal over a socket
    journal = (where or "").startswith("socket:") or (where is None and unit.exists()
                                                       and not darwin)
    if journal and shutil.which("journalctl"):
        cmd = ["journalctl", "--no-pager", "-n", str(args.lines)] + (
            ["-f"] if args.follow else []) + (
            ["--user", "-u", "memoryd"] if unit.exists() else [f"_PID={pid}"])
        print(f"(memoryd logs to the journal: {' '.join(cmd)})", file=sys.stderr)
        return _run(cmd)
    if pid is None:
        print("memoryctl: memoryd is not running and writes no log file. Run as a service "
              "its log is in the journal (journalctl --user -u memoryd); in a terminal, on "
              f"its stderr; [log] file = true also writes {paths.log_file}", file=sys.stderr)
        return EXIT_NOT_RUNNING
    print(f"memoryd {pid} logs to its stderr" + (f", {where}" if where else "")
          + ": the terminal or program that started it shows it. To read it here, set "
          f"[log] file = true (it also writes {paths.log_file}), or run it as a service "
          "(`memoryctl service install`: journalctl --user -u memoryd)")
    return EXIT_OK


def _tail(path: Path, args: argparse.Namespace) -> int:
    return _run(["tail", f"-n{args.lines}"] + (["-F"] if args.follow else []) + [str(path)])


def _run(cmd: list[str]) -> int:
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return EXIT_OK


def _daemon_pid(args: argparse.Namespace) -> int | None:
    """The running daemon's pid (it is this user's: the socket checks that), or None."""
    try:
        pid = MemorydClient(_socket(args), timeout=5).status().get("pid")
    except (DaemonNotRunning, ApiError, OSError):
        return None
    return pid if isinstance(pid, int) else None


def _stderr_of(pid: int) -> str | None:
    """Where a process's stderr goes: a path, "socket:[inode]", "pipe:[inode]", a tty
    (Linux's /proc); None where that cannot be read (another OS)."""
    try:
        return os.readlink(f"/proc/{pid}/fd/2")
    except OSError:
        return None


def _launchd_log(plist: Path) -> Path | None:
    import plistlib

    try:
        err = plistlib.loads(plist.read_bytes()).get("StandardErrorPath")
    except (OSError, ValueError, plistlib.InvalidFileException):
        return None
    return Path(err) if isinstance(err, str) else None


def version(args: argparse.Namespace) -> int:
    client = MemorydClient(_socket(args), timeout=5)
    print(f"memoryctl {__version__}")
    try:
        server = client.health()["version"]
    except DaemonNotRunning as e:
        print(f"memoryd   not running ({e.path})")
        return EXIT_NOT_RUNNING
    print(f"memoryd   {server}")
    if server != __version__:
        print(f"warning: client {__version__} and daemon {server} differ; restart memoryd "
              "after upgrading (systemctl --user restart memoryd)", file=sys.stderr)
        return EXIT_MISMATCH
    return EXIT_OK


def edit_memory(client: MemorydClient) -> int:
    current = client.memory()
    content, version = current["content"], current.get("version")
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    d = tempfile.mkdtemp(prefix="memoryd-edit-")
    f = Path(d) / "MEMORY.md"
    f.write_text(content, encoding="utf-8")
    code = subprocess.call([*shlex.split(editor), str(f)])
    if code != 0:
        print(f"memoryctl: {editor} exited with {code}; MEMORY.md left unchanged",
              file=sys.stderr)
        return EXIT_ERROR
    new = f.read_text(encoding="utf-8")
    if new == content:
        f.unlink()
        os.rmdir(d)
        print("no changes")
        return EXIT_OK
    try:
        client.memory_replace(new, version)
    except ApiError as e:
        # keep the person's edit: it is the only copy
        print(f"memoryctl: not saved: {e.message}. Your edit is kept in {f}", file=sys.stderr)
        return EXIT_USAGE if e.status == 400 else EXIT_ERROR
    f.unlink()
    os.rmdir(d)
    print("MEMORY.md updated")
    return EXIT_OK


def doctor(args: argparse.Namespace) -> int:
    """Each check prints ok / warn / FAIL with what to do; exit 1 if anything failed."""
    from memoryd.config import ConfigError, load_settings
    from memoryd.paths import MAX_SOCKET_PATH
    from memoryd.ingest.sources import configured_sources

    failed = False

    def report(level: str, what: str, detail: str) -> None:
        nonlocal failed
        failed |= level == "FAIL"
        print(f"{level:<5} {what:<10} {detail}")

    paths = resolve_paths(args.home)
    path = _config_file(args, paths)
    settings: Any = None
    try:
        settings = load_settings(path)
        report("ok", "config", str(path) if path.exists() else "defaults (no config file)")
    except ConfigError as e:
        report("FAIL", "config", str(e))
    # the runtime dir falls back to the state dir (no $XDG_RUNTIME_DIR): one line for it
    dirs = dict.fromkeys(getattr(paths, n) for n in ("config_dir", "data_dir", "state_dir",
                                                     "runtime_dir"))
    for d in dirs:
        if not d.exists():
            report("warn", "dirs", f"{d} does not exist yet (memoryd creates it)")
            continue
        mode = stat.S_IMODE(d.stat().st_mode)
        if mode & 0o077:
            report("warn", "dirs", f"{d} is mode {mode:o}; chmod 700 {d}")
        else:
            report("ok", "dirs", f"{d} (700)")
    if paths.token_file.exists():
        mode = stat.S_IMODE(paths.token_file.stat().st_mode)
        report("ok" if not mode & 0o077 else "FAIL", "token",
               f"{paths.token_file} ({mode:o})" + ("" if not mode & 0o077 else
                                                   f"; chmod 600 {paths.token_file}"))
    sock = _socket(args)
    status: dict[str, Any] | None = None
    if len(os.fsencode(str(sock))) > MAX_SOCKET_PATH:
        report("FAIL", "socket", f"{sock} is over {MAX_SOCKET_PATH} bytes; set --socket")
    try:
        t0 = time.perf_counter()
        client = MemorydClient(sock, timeout=5)
        health = client.health()
        status = client.status()
        report("ok", "daemon", f"memoryd {health['version']} answers on {sock} in "
                               f"{(time.perf_counter() - t0) * 1000:.0f} ms")
        if health["version"] != __version__:
            report("warn", "version", f"daemon {health['version']}, client {__version__}")
    except DaemonNotRunning as e:
        report("FAIL", "daemon", str(e))
    except (OSError, ApiError) as e:
        report("FAIL", "daemon", f"{sock}: {e}")
    if status is not None:
        sources = status["sources"]
    elif settings is not None:
        sources = [s.as_dict() for s in configured_sources(settings, os.environ)]
    else:
        sources = []
    found = [s for s in sources if s["exists"]]
    report("ok" if found else "warn", "sources",
           f"{len(found)} of {len(sources)} locations present: "
           + ", ".join(f"{s['agent']}={s['path']}" for s in found) if found else
           "no agent transcripts found; add --source AGENT=PATH or [watch] sources")
    store = (status or {}).get("store") or {}
    if store.get("reachable") is False:
        report("FAIL", "store", store_down_line(store))
    elif store.get("kind") == "postgresql":
        report("ok", "store", f"{store['url']} reachable (namespace {store['namespace']}, "
                              f"machine {store['machine']})")
    ingest = (status or {}).get("ingest") or {}
    for f in ingest.get("failing_files", []):
        report("FAIL" if f["kind"] != "unreadable" else "warn", "ingest",
               f"{f['path']}: {f['reason']} ({f['attempts']} tries; retried automatically)")
    bad = ingest.get("files_with_bad_lines", [])
    if bad:
        report("warn", "ingest", f"{len(bad)} file(s) with skipped bad lines, e.g. "
                                 f"{bad[0]['path']} ({bad[0]['bad_lines']})")
    llm = (status or {}).get("llm")
    model = settings and (os.environ.get("MEMORYD_SUMMARY_MODEL") or settings.llm.summary_model
                          or settings.llm.model)
    if llm and llm.get("model") and llm.get("api_key") == "unset":
        report("FAIL", "llm", f"{llm['model']}: {llm.get('extractive_reason') or 'no API key'}"
                              " in the daemon's environment; summaries stay extractive until "
                              "it is set (e.g. in ~/.config/memoryd/env) and memoryd restarts")
    elif llm:
        level = "FAIL" if llm.get("paused") else "ok"
        report(level, "llm", f"{llm.get('model') or 'extractive'}"
                             + (f": paused: {llm['paused']}" if llm.get("paused") else ""))
    elif model:
        from memoryd.llm import resolve_model

        choice = resolve_model(settings.llm, os.environ)
        if choice.missing_key:
            report("FAIL", "llm", f"{model}: {choice.missing_key}; summaries would be "
                                  "extractive until it is set")
        else:
            report("warn", "llm", f"{model} configured; reachability is checked by the daemon "
                                  "(start it and run doctor again)")
    else:
        report("ok", "llm", "no model configured: extractive summaries")
    return EXIT_ERROR if failed else EXIT_OK


def mcp(args: argparse.Namespace) -> int:
    from memoryd.cli.mcp import serve

    return serve(MemorydClient(_socket(args)))


def service(args: argparse.Namespace) -> int:
    from memoryd.cli.service import service as run

    return run(args)
