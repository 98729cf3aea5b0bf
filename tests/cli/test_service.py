"""`memoryctl service install|uninstall|status` against stand-in `systemctl` and
`launchctl` executables on PATH that record their calls and fail on demand, in a home
whose path has every character that broke the service files."""

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.cli.commands import main
from memoryd.cli.service import LABEL, systemd_quote

TRICKY = "a b&c%d<e>"

STAND_IN = """#!/bin/sh
echo "$(basename "$0") $*" >> "$STANDIN_LOG"
if [ -n "$STANDIN_FAIL" ]; then
  case "$*" in *"$STANDIN_FAIL"*)
    echo "Failed to connect to bus: No medium found" >&2; exit 1;;
  esac
fi
case "$*" in
  *is-active*) echo active;;
  "print gui/"*/*) echo "state = running";;
esac
exit 0
"""


def _exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def box(tmp_path, monkeypatch):
    """A user home at an awkward path, memoryd installed in its ~/.local/bin and the
    stand-ins first on PATH."""
    home = tmp_path / TRICKY
    state = home / "state"  # MEMORYD_HOME, the awkward path again
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("MEMORYD_HOME", str(state))
    monkeypatch.delenv("MEMORYD_CONFIG", raising=False)
    monkeypatch.delenv("MEMORYD_SERVICE_PLATFORM", raising=False)
    bin_dir = tmp_path / "standins"
    for name in ("systemctl", "launchctl"):
        _exe(bin_dir / name, STAND_IN)
    exe = _exe(home / ".local" / "bin" / "memoryd", "#!/bin/sh\nexit 0\n")
    log = tmp_path / "calls.log"
    monkeypatch.setenv("STANDIN_LOG", str(log))
    monkeypatch.delenv("STANDIN_FAIL", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), str(exe.parent), "/usr/bin", "/bin"]))

    class Box:
        pass

    b = Box()
    b.home, b.state, b.exe, b.log = home, state, exe, log
    b.unit = home / ".config" / "systemd" / "user" / "memoryd.service"
    b.plist = home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    b.calls = lambda: log.read_text().splitlines() if log.exists() else []
    return b


def systemd_words(line: str, *, exec_line: bool = False) -> list[str]:
    """Split and unquote a unit-file value the way systemd does (extract_first_word with
    quotes and C escapes, then `%%` -> `%` and, in ExecStart=, `$$` -> `$`)."""
    words, i, n = [], 0, len(line)
    escapes = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
    while i < n:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quote = "", None
        while i < n:
            c = line[i]
            if c == "\\":
                word += escapes[line[i + 1]]
                i += 2
                continue
            if quote:
                if c == quote:
                    quote = None
                else:
                    word += c
            elif c in "\"'":
                quote = c
            elif c in " \t":
                break
            else:
                word += c
            i += 1
        assert quote is None, f"unterminated quote in {line!r}"
        assert "%" not in word.replace("%%", ""), f"a bare specifier in {word!r}"
        word = word.replace("%%", "%")
        words.append(word.replace("$$", "$") if exec_line else word)
    return words


def _values(unit: str, key: str) -> list[str]:
    return [ln.removeprefix(key + "=") for ln in unit.splitlines() if ln.startswith(key + "=")]


def test_install_writes_a_unit_that_gives_back_the_exact_paths(box, capsys):
    assert main(["service", "install"]) == 0
    out = capsys.readouterr().out
    unit = box.unit.read_text()
    assert systemd_words(_values(unit, "ExecStart")[0], exec_line=True) == [str(box.exe)]
    env = dict(systemd_words(v)[0].split("=", 1) for v in _values(unit, "Environment"))
    assert env["MEMORYD_HOME"] == str(box.state)
    assert "Documentation=" not in unit and ".venv" not in unit
    assert box.calls() == ["systemctl --user show-environment",
                           "systemctl --user daemon-reload",
                           "systemctl --user enable --now memoryd.service",
                           "systemctl --user is-active memoryd.service"]
    assert f"wrote {box.unit}" in out and "memoryd service: active" in out
    if shutil.which("systemd-analyze"):
        r = subprocess.run(["systemd-analyze", "verify", str(box.unit)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_no_user_manager_fails_with_the_reason_and_installs_nothing(box, capsys, monkeypatch):
    monkeypatch.setenv("STANDIN_FAIL", "show-environment")
    assert main(["service", "install"]) == 1
    err = capsys.readouterr().err
    assert "Failed to connect to bus" in err and "enable-linger" in err
    assert "systemctl --user enable --now memoryd.service" in err and "--dry-run" in err
    assert not box.unit.exists()
    assert box.calls() == ["systemctl --user show-environment"]


def test_a_failed_enable_is_undone(box, capsys, monkeypatch):
    monkeypatch.setenv("STANDIN_FAIL", "enable")
    assert main(["service", "install"]) == 1
    err = capsys.readouterr().err
    assert "systemctl --user enable --now memoryd.service` failed" in err
    assert "to do it by hand:" in err and "--dry-run" in err
    assert not box.unit.exists() and not box.unit.with_name("memoryd.service.tmp").exists()
    assert box.calls()[-2:] == ["systemctl --user disable --now memoryd.service",
                                "systemctl --user daemon-reload"]


def test_a_failed_reinstall_puts_the_previous_unit_back(box, capsys, monkeypatch):
    assert main(["service", "install"]) == 0
    before = box.unit.read_text()
    monkeypatch.setenv("STANDIN_FAIL", "enable")
    assert main(["--home", str(box.home / "other"), "service", "install"]) == 1
    assert box.unit.read_text() == before


def test_a_memoryd_only_in_a_checkout_venv_is_refused(box, capsys, monkeypatch, tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "pyproject.toml").parent.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\nname = 'memoryd'\n")
    venv_bin = checkout / ".venv" / "bin"
    _exe(venv_bin / "memoryd", "#!/bin/sh\n")
    box.exe.unlink()
    monkeypatch.setenv("PATH", os.pathsep.join([str(venv_bin), os.environ["PATH"]]))
    assert main(["service", "install"]) == 1
    err = capsys.readouterr().err
    assert "no installed memoryd on PATH" in err and str(venv_bin) in err
    assert "uv tool install" in err
    assert not box.unit.exists() and box.calls() == []


def test_an_installed_memoryd_wins_over_the_checkout_venv(box, capsys, monkeypatch, tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("")
    venv_bin = checkout / ".venv" / "bin"
    _exe(venv_bin / "memoryd", "#!/bin/sh\n")
    monkeypatch.setenv("PATH", os.pathsep.join([str(venv_bin), os.environ["PATH"]]))
    assert main(["service", "install", "--dry-run"]) == 0
    assert systemd_words(_values(capsys.readouterr().out, "ExecStart")[0],
                         exec_line=True) == [str(box.exe)]


def test_dry_run_prints_the_file_and_changes_nothing(box, capsys):
    assert main(["service", "install", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "ExecStart=" in out and "Type=notify" in out
    assert "# would run: systemctl --user enable --now memoryd.service" in out
    assert not box.unit.exists() and not box.unit.parent.exists() and box.calls() == []
    assert main(["service", "uninstall", "--dry-run"]) == 0
    assert "would remove" in capsys.readouterr().out and box.calls() == []


def test_status_says_what_is_installed_and_running(box, capsys, monkeypatch):
    assert main(["service", "status"]) == 5  # not installed (issue 28)
    assert "not installed" in capsys.readouterr().out
    assert main(["service", "install"]) == 0
    capsys.readouterr()
    assert main(["service", "status"]) == 0
    out = capsys.readouterr().out
    assert f"installed at {box.unit}" in out and "state: active" in out
    assert systemd_words(_values(out, "ExecStart")[0], exec_line=True) == [str(box.exe)]
    monkeypatch.setenv("STANDIN_FAIL", "is-active")
    assert main(["service", "status"]) == 3


def test_uninstall_stops_and_removes(box, capsys):
    assert main(["service", "install"]) == 0
    assert main(["service", "uninstall"]) == 0
    assert not box.unit.exists() and f"removed {box.unit}" in capsys.readouterr().out
    assert "systemctl --user disable --now memoryd.service" in box.calls()
    assert main(["service", "uninstall"]) == 0
    assert "not installed" in capsys.readouterr().out


def test_launchd_writes_a_plist_and_bootstraps_it(box, capsys, monkeypatch):
    monkeypatch.setenv("MEMORYD_SERVICE_PLATFORM", "darwin")
    domain = f"gui/{os.getuid()}"
    assert main(["service", "install"]) == 0
    plist = plistlib.loads(box.plist.read_bytes())
    assert plist["Label"] == LABEL and plist["ProgramArguments"] == [str(box.exe)]
    assert plist["EnvironmentVariables"]["MEMORYD_HOME"] == str(box.state)
    assert plist["StandardErrorPath"] == str(box.state / "log" / "memoryd.err.log")
    assert plist["RunAtLoad"] is True
    assert box.calls() == [f"launchctl print {domain}",
                           f"launchctl bootstrap {domain} {box.plist}",
                           f"launchctl print {domain}/{LABEL}"]
    capsys.readouterr()
    assert main(["service", "status"]) == 0
    out = capsys.readouterr().out
    assert "LaunchAgent: installed" in out and f"ProgramArguments: {box.exe}" in out
    assert main(["service", "uninstall"]) == 0
    assert f"launchctl bootout {domain}/{LABEL}" in box.calls() and not box.plist.exists()


def test_launchd_failures_leave_no_plist(box, capsys, monkeypatch):
    monkeypatch.setenv("MEMORYD_SERVICE_PLATFORM", "darwin")
    monkeypatch.setenv("STANDIN_FAIL", "bootstrap")
    assert main(["service", "install"]) == 1
    assert "launchctl bootstrap" in capsys.readouterr().err and not box.plist.exists()
    monkeypatch.setenv("STANDIN_FAIL", "print")
    assert main(["service", "install"]) == 1
    assert "GUI domain" in capsys.readouterr().err and not box.plist.exists()


def test_launchd_logs_follow_platformdirs_without_a_home(box, capsys, monkeypatch):
    monkeypatch.setenv("MEMORYD_SERVICE_PLATFORM", "darwin")
    monkeypatch.delenv("MEMORYD_HOME")
    assert main(["service", "install", "--dry-run"]) == 0
    out = capsys.readouterr().out
    plist = plistlib.loads(out.split("\n", 1)[1].split("# would run")[0].encode())
    assert plist["StandardOutPath"] == str(box.home / "Library" / "Logs" / "memoryd"
                                           / "memoryd.out.log")
    assert "EnvironmentVariables" in plist and "MEMORYD_HOME" not in plist["EnvironmentVariables"]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1))
def test_systemd_quoting_gives_back_the_exact_value(value):
    assert systemd_words(systemd_quote(value, exec_arg=True), exec_line=True) == [value]
    assert systemd_words(systemd_quote(value)) == [value]


def test_issue_28_service_status_not_installed_is_not_daemon_not_running(box, capsys,
                                                                         monkeypatch):
    """5 "not installed" (documented), never 3, which says an installed service is down;
    the same for a LaunchAgent."""
    assert main(["service", "status"]) == 5
    out = capsys.readouterr().out
    assert f"systemd user unit: not installed ({box.unit} does not exist)" in out
    assert "memoryctl service install" in out and box.calls() == []
    monkeypatch.setenv("MEMORYD_SERVICE_PLATFORM", "darwin")
    assert main(["service", "status"]) == 5
    assert "LaunchAgent: not installed" in capsys.readouterr().out


def test_issue_28_install_uses_the_memoryd_beside_the_running_memoryctl(box, tmp_path):
    """memoryd not on PATH, but installed beside the memoryctl being run (its bin dir not
    on PATH: run by its full path): that memoryd goes in the unit."""
    tool_bin = tmp_path / "tool" / "bin"
    memoryd = _exe(tool_bin / "memoryd", "#!/bin/sh\nexit 0\n")
    ctl = _exe(tool_bin / "memoryctl", f"#!{sys.executable}\n"
               "from memoryd.cli.memoryctl import main\nraise SystemExit(main())\n")
    box.exe.unlink()  # nothing on PATH
    p = subprocess.run([str(ctl), "service", "install", "--dry-run"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert systemd_words(_values(p.stdout, "ExecStart")[0], exec_line=True) == [str(memoryd)]
    memoryd.unlink()  # and with none beside it either: refused, saying where it looked
    p = subprocess.run([str(ctl), "service", "install", "--dry-run"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1 and "no installed memoryd on PATH or beside memoryctl" in p.stderr
