"""`memoryctl service install|uninstall|status`: run memoryd as a systemd user service
(Linux) or a launchd LaunchAgent (macOS), from the unit files shipped with the package.

Install checks what it needs first (an installed `memoryd`, a reachable systemd user
manager or launchd GUI domain), then writes the file and starts it; when a step fails it
undoes the steps before it, prints the reason and the commands to finish by hand, and
exits non-zero. `--dry-run` prints the file and the commands and changes nothing.
`status` exits 0 when the service runs, 3 when it is installed but not running, and 5
when it is not installed.

`MEMORYD_SERVICE_PLATFORM` (`linux` or `darwin`, read only here) picks the service manager
regardless of the running OS, so both paths are tested anywhere with stand-ins.
"""

from __future__ import annotations

import argparse
import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LABEL = "dev.memoryd.daemon"
UNIT = "memoryd.service"
EXIT_OK, EXIT_ERROR, EXIT_NOT_RUNNING = 0, 1, 3
# `service status` with no unit or LaunchAgent installed: not "not running" (3), which
# says an installed service is down; memoryctl's other codes are 0-4, so 5
EXIT_NOT_INSTALLED = 5


class ServiceError(Exception):
    """A step failed: `reason` says what, `manual` lists the commands to do it by hand."""

    def __init__(self, reason: str, manual: list[str] | None = None) -> None:
        super().__init__(reason)
        self.reason, self.manual = reason, manual or []


def platform() -> str:
    return os.environ.get("MEMORYD_SERVICE_PLATFORM") or (
        "darwin" if sys.platform == "darwin" else "linux")


def _unit_source(name: str) -> str:
    """The packaged copy (wheel: memoryd/_data/systemd) or the checkout's systemd/."""
    here = Path(__file__).resolve().parents[1]
    for d in (here / "_data" / "systemd", here.parent / "systemd"):
        if (d / name).is_file():
            return (d / name).read_text()
    raise FileNotFoundError(f"{name} is not shipped with this installation")


def _in_checkout_venv(exe: Path) -> bool:
    return any(p.name == ".venv" and (p.parent / "pyproject.toml").is_file()
               for p in exe.absolute().parents)


def memoryd_executable() -> Path:
    """The installed `memoryd` on PATH (a `uv tool install` puts it in ~/.local/bin), not a
    checkout's .venv, which moves or disappears with the checkout."""
    found = shutil.which("memoryd")
    skipped = []
    if found and _in_checkout_venv(Path(found)):
        skipped.append(found)
        rest = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                               if d and not _in_checkout_venv(Path(d) / "memoryd"))
        found = shutil.which("memoryd", path=rest)
    if found:
        return Path(found).absolute()
    for beside in _beside_memoryctl():
        if _in_checkout_venv(beside):
            skipped.append(str(beside))
        else:
            return beside
    where = f" (only in a checkout's .venv: {skipped[0]})" if skipped else ""
    raise ServiceError(f"no installed memoryd on PATH or beside memoryctl{where}",
                       ["uv tool install /path/to/memoryd-checkout   # or: uv tool install memoryd",
                        "memoryctl service install"])


def _beside_memoryctl() -> list[Path]:
    """The `memoryd` installed with the running memoryctl, when its bin dir is not on
    PATH (memoryctl run by its full path, a venv not activated): beside the script run
    (sys.argv[0]) or the interpreter running it (sys.executable's bin)."""
    out: list[Path] = []
    for d in (Path(sys.argv[0]).absolute().parent, Path(sys.executable).absolute().parent):
        exe = d / "memoryd"
        if exe not in out and exe.is_file() and os.access(exe, os.X_OK):
            out.append(exe)
    return out


def target() -> Path:
    home = Path.home()
    if platform() == "darwin":
        return home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return config / "systemd" / "user" / UNIT


# -- rendering ------------------------------------------------------------------------

def systemd_quote(value: str, *, exec_arg: bool = False) -> str:
    """One word for a unit file, by systemd's rules: `%` is a specifier (`%%`), `$` in
    ExecStart= expands a variable (`$$`), and a word with spaces, quotes or backslashes
    goes in double quotes with `\\` and `"` escaped."""
    v = value.replace("%", "%%")
    if exec_arg:
        v = v.replace("$", "$$")
    if v and not any(c in v for c in ' \t\n"\'\\;'):
        return v
    v = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{v}"'


def render_systemd(cmd: list[str], env: dict[str, str]) -> str:
    lines = []
    for line in _unit_source("memoryd.service").splitlines():
        if line.startswith("Documentation="):
            continue
        if line.startswith("ExecStart="):
            line = "ExecStart=" + " ".join(systemd_quote(a, exec_arg=True) for a in cmd)
        lines.append(line)
        if line.startswith("Environment=LITELLM"):
            lines += [f"Environment={systemd_quote(f'{k}={v}')}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def render_plist(cmd: list[str], env: dict[str, str], log_dir: Path) -> str:
    plist = plistlib.loads(_unit_source("memoryd.plist").encode())
    plist["ProgramArguments"] = cmd
    plist["EnvironmentVariables"] = {**plist.get("EnvironmentVariables", {}), **env}
    plist["StandardOutPath"] = str(log_dir / "memoryd.out.log")
    plist["StandardErrorPath"] = str(log_dir / "memoryd.err.log")
    return plistlib.dumps(plist, sort_keys=False).decode()


def _log_dir(env: dict[str, str]) -> Path:
    """The LaunchAgent's stdout/stderr files: the home's log dir, else macOS's own
    (platformdirs: ~/Library/Logs/memoryd)."""
    if "MEMORYD_HOME" in env:
        from memoryd.paths import resolve_paths

        return resolve_paths(env["MEMORYD_HOME"]).log_dir
    from platformdirs.macos import MacOS

    return Path(MacOS("memoryd").user_log_dir)


# -- running the service manager -------------------------------------------------------

@dataclass
class Step:
    cmd: list[str]
    rc: int
    out: str
    err: str


def _call(cmd: list[str]) -> Step:
    if shutil.which(cmd[0]) is None:
        return Step(cmd, 127, "", f"{cmd[0]}: command not found")
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return Step(cmd, p.returncode, p.stdout, p.stderr)


def _must(cmd: list[str], manual: list[str]) -> Step:
    step = _call(cmd)
    if step.rc != 0:
        why = (step.err or step.out).strip().splitlines()
        raise ServiceError(f"`{' '.join(cmd)}` failed (exit {step.rc})"
                           + (f": {why[-1]}" if why else ""), manual)
    return step


def _domain() -> str:
    return f"gui/{os.getuid()}"


class Manager:
    """What differs between systemd and launchd: the preflight check, start and stop."""

    def __init__(self, path: Path) -> None:
        self.darwin = platform() == "darwin"
        self.path = path

    def start_commands(self) -> list[list[str]]:
        if self.darwin:
            return [["launchctl", "bootstrap", _domain(), str(self.path)]]
        return [["systemctl", "--user", "daemon-reload"],
                ["systemctl", "--user", "enable", "--now", UNIT]]

    def stop_commands(self) -> list[list[str]]:
        if self.darwin:
            return [["launchctl", "bootout", f"{_domain()}/{LABEL}"]]
        return [["systemctl", "--user", "disable", "--now", UNIT]]

    def manual(self) -> list[str]:
        return [" ".join(c) for c in self.start_commands()]

    def preflight(self) -> None:
        by_hand = [f"memoryctl service install --dry-run   # prints the file to save as "
                   f"{self.path}", *self.manual()]
        if self.darwin:
            _must(["launchctl", "print", _domain()],
                  ["# launchd's GUI domain is there in a logged-in macOS session; from it:",
                   *by_hand, "# or run the daemon in a terminal: memoryd"])
            return
        _must(["systemctl", "--user", "show-environment"],
              ["# no systemd user manager: log in through a session that starts one",
               "# (or: sudo loginctl enable-linger $USER), then:", *by_hand,
               "# until then, run the daemon in the foreground: memoryd"])

    def running(self) -> tuple[bool, str]:
        if self.darwin:
            s = _call(["launchctl", "print", f"{_domain()}/{LABEL}"])
            ok = s.rc == 0 and "state = running" in s.out
            return ok, "running" if ok else ("loaded, not running" if s.rc == 0
                                             else "not loaded")
        s = _call(["systemctl", "--user", "is-active", UNIT])
        return s.rc == 0, (s.out.strip() or s.err.strip() or f"exit {s.rc}")


# -- the verbs ---------------------------------------------------------------------------

def _extra_env(args: argparse.Namespace) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("MEMORYD_HOME", "MEMORYD_CONFIG") if k in os.environ}
    if args.home:
        env["MEMORYD_HOME"] = str(Path(args.home).absolute())
    return env


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def install(args: argparse.Namespace) -> int:
    path = target()
    mgr = Manager(path)
    env = _extra_env(args)
    exe = memoryd_executable()
    log_dir = _log_dir(env) if mgr.darwin else None
    text = render_plist([str(exe)], env, log_dir) if log_dir else render_systemd([str(exe)], env)
    if args.dry_run:
        print(f"# would write {path}:")
        sys.stdout.write(text)
        for c in mgr.start_commands():
            print("# would run: " + " ".join(c))
        return EXIT_OK
    mgr.preflight()
    before = path.read_text(encoding="utf-8") if path.exists() else None
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)  # launchd opens the files, not the dir
    if mgr.darwin and before is not None:
        _call(mgr.stop_commands()[0])  # bootstrap refuses a label that is loaded
    _write(path, text)
    done: list[list[str]] = []
    manual = [f"memoryctl service install --dry-run   # prints the file to save as {path}",
              *mgr.manual()]
    try:
        for c in mgr.start_commands():
            _must(c, manual)
            done.append(c)
    except ServiceError:
        _undo(mgr, path, before)
        raise
    print(f"wrote {path}\nExec: {exe}")
    for c in done:
        print("ran: " + " ".join(c))
    up, state = mgr.running()
    print(f"memoryd service: {state}")
    if not mgr.darwin:
        print("logs: journalctl --user -u memoryd; to keep it running while logged out: "
              "sudo loginctl enable-linger $USER")
    return EXIT_OK


def _undo(mgr: Manager, path: Path, before: str | None) -> None:
    """Put things back as they were: no new file and nothing enabled, or the previous file
    started again."""
    for c in mgr.stop_commands():
        _call(c)
    if before is None:
        path.unlink(missing_ok=True)
        if not mgr.darwin:
            _call(["systemctl", "--user", "daemon-reload"])
        return
    _write(path, before)
    for c in mgr.start_commands():
        _call(c)


def uninstall(args: argparse.Namespace) -> int:
    path = target()
    mgr = Manager(path)
    if args.dry_run:
        for c in mgr.stop_commands():
            print("# would run: " + " ".join(c))
        print(f"# would remove {path}")
        return EXIT_OK
    if not path.exists():
        print(f"not installed: {path} does not exist")
        return EXIT_OK
    for c in mgr.stop_commands():
        s = _call(c)
        print(f"ran: {' '.join(c)}" + (f" (exit {s.rc}: {s.err.strip()})" if s.rc else ""))
    path.unlink()
    if not mgr.darwin:
        _call(["systemctl", "--user", "daemon-reload"])
    print(f"removed {path}")
    return EXIT_OK


def status(args: argparse.Namespace) -> int:
    path = target()
    mgr = Manager(path)
    kind = "LaunchAgent" if mgr.darwin else "systemd user unit"
    if not path.exists():
        print(f"{kind}: not installed ({path} does not exist); `memoryctl service install` "
              "installs it")
        return EXIT_NOT_INSTALLED
    print(f"{kind}: installed at {path}")
    print(_installed_command(path, mgr.darwin))
    up, state = mgr.running()
    print(f"state: {state}")
    return EXIT_OK if up else EXIT_NOT_RUNNING


def _installed_command(path: Path, darwin: bool) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    if darwin:
        try:
            args = plistlib.loads(text.encode()).get("ProgramArguments", [])
        except plistlib.InvalidFileException as e:
            return f"ProgramArguments: (unreadable plist: {e})"
        return "ProgramArguments: " + " ".join(args)
    lines = [ln for ln in text.splitlines() if ln.startswith("ExecStart=")]
    return lines[0] if lines else "ExecStart=: (none)"


def service(args: argparse.Namespace) -> int:
    verb = {"install": install, "uninstall": uninstall, "status": status}[args.action]
    try:
        return verb(args)
    except ServiceError as e:
        print(f"memoryctl: service {args.action}: {e.reason}", file=sys.stderr)
        if e.manual:
            print("to do it by hand:", file=sys.stderr)
            for line in e.manual:
                print(f"  {line}", file=sys.stderr)
        return EXIT_ERROR
