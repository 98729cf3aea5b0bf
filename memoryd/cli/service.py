"""`memoryctl service install|uninstall`: run memoryd as a systemd user service (Linux)
or a launchd LaunchAgent (macOS), from the unit files shipped with the package."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

LABEL = "dev.memoryd.daemon"


def _unit_source(name: str) -> str:
    """The packaged copy (wheel: memoryd/_data/systemd) or the checkout's systemd/."""
    here = Path(__file__).resolve().parents[1]
    for d in (here / "_data" / "systemd", here.parent / "systemd"):
        if (d / name).is_file():
            return (d / name).read_text()
    raise FileNotFoundError(f"{name} is not shipped with this installation")


def _memoryd_command() -> list[str]:
    exe = shutil.which("memoryd")
    return [exe] if exe else [sys.executable, "-m", "memoryd"]


def _target(home: Path) -> Path:
    if sys.platform == "darwin":
        return home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return config / "systemd" / "user" / "memoryd.service"


def render(home: Path, extra_env: dict[str, str]) -> str:
    cmd = _memoryd_command()
    if sys.platform == "darwin":
        text = _unit_source("memoryd.plist")
        args = "".join(f"    <string>{a}</string>\n" for a in cmd)
        text = text.replace("    <string>/usr/local/bin/memoryd</string>\n", args)
        env = "".join(f"    <key>{k}</key>\n    <string>{v}</string>\n"
                      for k, v in extra_env.items())
        return text.replace("  </dict>\n  <key>RunAtLoad</key>", env + "  </dict>\n"
                            "  <key>RunAtLoad</key>")
    text = _unit_source("memoryd.service")
    text = text.replace("ExecStart=%h/.local/bin/memoryd", "ExecStart=" + " ".join(cmd))
    env = "".join(f"Environment={k}={v}\n" for k, v in extra_env.items())
    return text.replace("Restart=on-failure\n", env + "Restart=on-failure\n")


def _run(cmd: list[str], dry: bool) -> None:
    print("$ " + " ".join(cmd))
    if not dry and shutil.which(cmd[0]):
        subprocess.call(cmd)


def service(args: argparse.Namespace) -> int:
    home = Path.home()
    target = _target(home)
    launchd = sys.platform == "darwin"
    extra = {k: os.environ[k] for k in ("MEMORYD_HOME", "MEMORYD_CONFIG") if k in os.environ}
    if args.home:
        extra["MEMORYD_HOME"] = str(Path(args.home).absolute())
    if args.action == "install":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(home, extra))
        print(f"wrote {target}")
        if launchd:
            _run(["launchctl", "load", "-w", str(target)], args.dry_run)
        else:
            _run(["systemctl", "--user", "daemon-reload"], args.dry_run)
            _run(["systemctl", "--user", "enable", "--now", "memoryd"], args.dry_run)
        return 0
    if launchd:
        _run(["launchctl", "unload", "-w", str(target)], args.dry_run)
    else:
        _run(["systemctl", "--user", "disable", "--now", "memoryd"], args.dry_run)
    if target.exists():
        target.unlink()
        print(f"removed {target}")
    else:
        print(f"{target} was not installed")
    return 0
