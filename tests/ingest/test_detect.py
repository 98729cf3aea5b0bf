"""detect(), for_agent() and the agent registry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memoryd.ingest.adapters import ADAPTERS, AGENTS, detect, for_agent
from memoryd.ingest.adapters.gemini_cli import DOCUMENT_ADAPTER
from tests.ingest.transcripts import read_first_line


def fixture_files(fixtures_dir: Path) -> list[Path]:
    return sorted(p for p in fixtures_dir.rglob("*") if p.suffix in (".jsonl", ".json"))


def expected_agent(rel: Path) -> str | None:
    return None if rel.name == "logs.json" else rel.parts[0]


def test_registry():
    assert AGENTS == ("claude-code", "codex", "gemini-cli", "pi", "openclaw", "nanobot", "generic")
    assert all(ADAPTERS[name].agent == name for name in AGENTS)
    assert for_agent("codex") is ADAPTERS["codex"]
    with pytest.raises(
        ValueError,
        match="supported: claude-code, codex, gemini-cli, pi, openclaw, nanobot, generic",
    ):
        for_agent("cursor")


def test_detect_fixtures_copied_anywhere(fixtures_dir, tmp_path):
    """Tests copy fixtures into DIR/<agent>/...: the first line alone must decide."""
    files = fixture_files(fixtures_dir)
    assert len(files) == 22
    for src in files:
        rel = src.relative_to(fixtures_dir)
        dest = tmp_path / "copies" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
        adapter = detect(dest, tmp_path / "copies", read_first_line(dest))
        assert (adapter.agent if adapter else None) == expected_agent(rel), rel


def test_detect_gemini_picks_the_document_adapter_for_json(fixtures_dir):
    path = fixtures_dir / "gemini-cli/chats/session-2025-12-01T21-45-5b959dae.json"
    first = read_first_line(path)
    assert detect(path, fixtures_dir, first) is DOCUMENT_ADAPTER
    assert detect(path, fixtures_dir, first, agents=("gemini-cli",)) is DOCUMENT_ADAPTER
    assert detect(path, fixtures_dir, first, agents=("codex",)) is None
    assert not for_agent("gemini-cli").claims(path, fixtures_dir, first)  # the .jsonl one
    assert for_agent("gemini-cli", path) is DOCUMENT_ADAPTER
    assert for_agent("codex", path) is for_agent("codex")


ROLLOUT = "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
OPENCLAW_BUILD = "agents/build/sessions/006e7506-e899-4bac-8dd6-c432f5728831.jsonl"
# fixture -> where the agent would have written it (relative to a fake home)
DEFAULT_HOMES = {
    "claude-code/tiny-conversation.jsonl": ".claude/projects/-Users-u-proj/67a8478e.jsonl",
    f"codex/2026/02/23/{ROLLOUT}": f".codex/sessions/2026/02/23/{ROLLOUT}",
    "gemini-cli/chats/session-2025-12-01T21-45-5b959dae.json": (
        ".gemini/tmp/fb8e242a/chats/session-2025-12-01T21-45-5b959dae.json"
    ),
    "pi/large-session.jsonl": (
        ".pi/agent/sessions/--Users-badlogic-workspaces-pi-mono--/2025-11-20T23-33-50_d703a1a9.jsonl"
    ),
    f"openclaw/{OPENCLAW_BUILD}": f".openclaw/{OPENCLAW_BUILD}",
    "nanobot/KamilDV/cli_direct.jsonl": ".nanobot/workspace/sessions/cli_direct.jsonl",
}


@pytest.mark.parametrize("src", sorted(DEFAULT_HOMES))
def test_detect_default_locations(fixtures_dir, tmp_path, src):
    dest = tmp_path / DEFAULT_HOMES[src]
    dest.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / src, dest)
    adapter = detect(dest, tmp_path, read_first_line(dest))
    assert adapter is not None and adapter.agent == src.split("/")[0]


def test_detect_tolerates_a_first_line_cut_at_the_cap(fixtures_dir):
    """The ingestor may pass only the first 1 MiB of a line: a Codex session_meta with
    large instructions, or a Claude entry holding an image, is then not valid JSON."""
    codex = (
        fixtures_dir
        / "codex/2026/05/11/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
    )
    first = read_first_line(codex)
    assert len(first) > 20_000
    assert detect(codex, fixtures_dir, first[:1000]).agent == "codex"
    claude = fixtures_dir / "claude-code/tiny-conversation.jsonl"
    assert detect(claude, fixtures_dir, read_first_line(claude)[:300]).agent == "claude-code"
    pi = fixtures_dir / "pi/large-session.jsonl"
    assert detect(pi, fixtures_dir, read_first_line(pi)[:60]).agent == "pi"


@pytest.mark.parametrize(
    ("name", "first_line"),
    [
        ("garbage.jsonl", b"this is not json"),
        ("binary.jsonl", b"\x00\x01\xff\xfe\x89PNG"),
        ("empty.jsonl", b""),
        ("array.jsonl", b"[1, 2, 3]"),
        ("number.jsonl", b"42"),
        (
            "sessions.json",
            json.dumps({"agent:main:main": {"sessionId": "x", "updatedAt": 1}}).encode(),
        ),
        ("logs.json", b"["),
        ("checkpoint-mytag.json", b"{"),
        ("history.jsonl", json.dumps({"session_id": 1, "ts": 1, "text": "ls"}).encode()),
        ("notes.txt", json.dumps({"role": "user", "content": "hi"}).encode()),
        ("rollout.jsonl.zst", b'{"timestamp":"x","type":"session_meta","payload":{}}'),
        ("other.jsonl", json.dumps({"type": "event", "data": {}}).encode()),
        ("qrels.jsonl", json.dumps({"qid": "1", "question": "?"}).encode()),
    ],
)
def test_detect_returns_none_for_unknown_files(tmp_path, name, first_line):
    assert detect(tmp_path / name, tmp_path, first_line) is None


def test_detect_unknown_claude_line_type_in_claude_home(tmp_path):
    first = json.dumps({"type": "agent-setting", "agentSetting": "x"}).encode()
    home = tmp_path / ".claude" / "projects" / "-p" / "s.jsonl"
    assert detect(home, tmp_path, first).agent == "claude-code"
    assert detect(tmp_path / "elsewhere" / "s.jsonl", tmp_path, first) is None
