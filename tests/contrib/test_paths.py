"""The contrib snippets call an installed memoryctl by absolute path, never a bare name
that only works when the agent happens to inherit the user's PATH."""

import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_claude_code_hooks_run_the_installed_memoryctl(tmp_path):
    home = tmp_path / "home"
    bin_dir = home / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "calls"
    (bin_dir / "memoryctl").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n')
    (bin_dir / "memoryctl").chmod(0o755)
    settings = json.loads((ROOT / "contrib" / "claude-code" / "settings.json").read_text())
    commands = [h["command"] for groups in settings["hooks"].values()
                for g in groups for h in g["hooks"]]
    assert commands
    for cmd in commands:  # Claude Code runs hook commands through a shell, PATH or not
        subprocess.run(["/bin/sh", "-c", cmd], env={"HOME": str(home), "PATH": "/nonexistent"},
                       check=True, input="{}", text=True)
    assert log.read_text().splitlines() == ["hook claude-code --budget 1500"] * len(commands)


def test_no_snippet_calls_a_bare_memoryctl():
    bare = re.compile(r'"command":\s*"memoryctl"|command\s*=\s*"memoryctl"|--\s+memoryctl\b')
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in (ROOT / "contrib").rglob("*")
             if p.is_file() for m in bare.finditer(p.read_text())]
    assert found == []
    assert os.sep + ".venv" + os.sep not in (ROOT / "systemd" / "memoryd.service").read_text()
