"""The README's configuration table names every setting."""

from pathlib import Path

from memoryd.config import Settings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_in_the_readme():
    missing = [f"{section}.{key}"
               for section, field in Settings.model_fields.items()
               for key in field.annotation.model_fields
               if f"`{section}.{key}`" not in README]
    assert missing == []


def test_readme_first_screen_has_the_two_commands():
    first_screen = "\n".join(README.splitlines()[:20])
    assert "uv run memoryd" in first_screen and "uv run --group test pytest" in first_screen


def test_memoryctl_help_matches_the_docs(monkeypatch):
    import contextlib
    import io

    import pytest

    from memoryd.cli.commands import main

    monkeypatch.setenv("COLUMNS", "100")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    doc = (Path(__file__).resolve().parents[1] / "docs" / "memoryctl-help.txt").read_text()
    assert out.getvalue() == doc, "regenerate docs/memoryctl-help.txt (see tests/test_docs.py)"


ROOT = Path(__file__).resolve().parents[1]
TOOLING = ("pytest", "playwright", "schemathesis", "hypothesis", "py-spy")


def test_issue_28_uv_run_memoryd_installs_no_test_tooling():
    import shutil
    import subprocess

    import pytest

    for doc in (README, (ROOT / ".ci" / "run").read_text(), (ROOT / "AGENTS.md").read_text()):
        assert "uv run --group test pytest" in doc
        assert "uv run pytest" not in doc  # a fresh clone has no pytest without the group
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")

    def locked(*args: str) -> set[str]:  # what `uv run` would install, from uv.lock
        out = subprocess.run([uv, "export", "--frozen", "--no-hashes", "--no-header",
                              "--no-emit-project", *args], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
        return {line.split("==")[0].split("[")[0].strip().lower() for line in out.splitlines()
                if line and not line.startswith((" ", "#"))}

    runtime = locked()
    assert "aiohttp" in runtime and "litellm" in runtime
    assert runtime.isdisjoint(TOOLING), sorted(runtime & set(TOOLING))
    assert set(TOOLING) <= locked("--group", "test")
