"""memoryctl's quick path finds the socket without importing memoryd.paths (dataclasses,
pathlib, platformdirs), and where it does, it finds what memoryd.paths finds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.cli.locate import plain_dirs
from memoryd.paths import resolve_paths
from tests.helpers import short_dir

XDG = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")


@pytest.mark.parametrize("env", [
    {},
    {"XDG_CONFIG_HOME": "/cfg", "XDG_STATE_HOME": "/st"},
    {"XDG_CONFIG_HOME": "relative/cfg", "XDG_STATE_HOME": ""},  # ignored, as XDG says
    {"XDG_CONFIG_HOME": "/cfg/", "XDG_STATE_HOME": "/st//x"},  # left to memoryd.paths
    {"XDG_RUNTIME_DIR": "{tmp}/run"},
    {"XDG_RUNTIME_DIR": "{tmp}/missing"},
    {"HOME": "{tmp}/h"},
    {"HOME": "rel"},  # left to memoryd.paths
])
@pytest.mark.parametrize("home", [None, "{tmp}/home", "~/mh", "relhome", "{tmp}/a/../b",
                                  "{tmp}/ends/"])
def test_plain_dirs_match_resolve_paths(env, home, tmp_path, monkeypatch):
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMORYD_HOME", raising=False)
    for k in XDG:
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v.format(tmp=tmp_path))
    home = home.format(tmp=tmp_path) if home else None
    got = plain_dirs(home, os.environ)
    if got is None:  # the caller asks memoryd.paths
        assert (env.get("HOME") == "rel" or "/cfg/" in str(env) or ".." in (home or "")
                or (home or "").endswith("/"))
        return
    paths = resolve_paths(home)
    assert got == (str(paths.config_file), str(paths.socket))


def test_quick_context_finds_the_home_socket_without_memoryd_paths():
    """`memoryctl context` with $MEMORYD_HOME (and with XDG defaults) imports none of
    memoryd.paths, platformdirs, dataclasses; with no daemon it names the socket it
    tried, as the argparse path does. The homes are short: pytest's tmp_path under a
    long TMPDIR made the socket path longer than AF_UNIX allows (108 bytes)."""
    code = ("import sys; from memoryd.cli import memoryctl; rc = memoryctl.main(['context', 'x']); "
            "print(rc, [m for m in ('memoryd.paths', 'platformdirs', 'dataclasses') "
            "if m in sys.modules])")
    with short_dir() as tmp_path:
        _no_daemon_at_either_home(code, tmp_path)


def _no_daemon_at_either_home(code: str, tmp_path: Path) -> None:
    for extra in ({"MEMORYD_HOME": str(tmp_path / "home")},
                  {"HOME": str(tmp_path / "user"), "XDG_RUNTIME_DIR": ""}):
        env = {k: v for k, v in os.environ.items()
               if k not in ("MEMORYD_HOME", "MEMORYD_SOCKET", *XDG)}
        env.update(extra)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env)
        assert r.stdout.strip() == "3 []", r.stderr
        home = extra.get("MEMORYD_HOME")
        want = (f"{home}/run/memoryd.sock" if home
                else f"{tmp_path}/user/.local/state/memoryd/memoryd.sock")
        assert f"no socket at {want}" in r.stderr
