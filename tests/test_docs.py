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
    assert "uv run memoryd" in first_screen and "uv run pytest" in first_screen
    assert "uv run pytest" in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()


def test_memoryctl_help_matches_the_docs(monkeypatch):
    import contextlib
    import io

    import pytest

    from memoryd.cli.memoryctl import main

    monkeypatch.setenv("COLUMNS", "100")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    doc = (Path(__file__).resolve().parents[1] / "docs" / "memoryctl-help.txt").read_text()
    assert out.getvalue() == doc, "regenerate docs/memoryctl-help.txt (see tests/test_docs.py)"
