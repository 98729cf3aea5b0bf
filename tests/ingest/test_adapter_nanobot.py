"""nanobot adapter against fixtures/sessions/nanobot/*/cli_direct.jsonl."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from memoryd.ingest.adapters.nanobot import ADAPTER
from tests.ingest.transcripts import (
    duplicate_keys,
    parse_fixture,
    session_of,
    unit_counts,
    unpaired_calls,
)

# folder -> units per role
CASES = {
    "KamilDV": {"user": 24, "assistant": 12, "tool": 3},
    "marmotworks": {"user": 26, "assistant": 26},
    "nurlingo": {"user": 7, "assistant": 31, "tool": 24},
}


@pytest.fixture
def shanghai(monkeypatch):
    """Run with the host zone set to UTC+8 (no DST), restoring it afterwards."""
    with monkeypatch.context() as m:
        m.setenv("TZ", "Asia/Shanghai")
        time.tzset()
        try:
            yield
        finally:
            m.undo()
            time.tzset()


@pytest.mark.parametrize("folder", sorted(CASES))
def test_nanobot_fixture_sessions_and_counts(fixtures_dir, folder):
    path = fixtures_dir / "nanobot" / folder / "cli_direct.jsonl"
    state, records, bad = parse_fixture(path, fixtures_dir, ADAPTER)
    assert bad == 0
    assert {session_of(r, state) for r in records} == {f"nanobot/{folder}/cli_direct"}
    assert {r.project for r in records} == {str(path.parent)}
    assert state["title"] == "cli:direct"
    assert unit_counts(records) == CASES[folder]
    assert unpaired_calls(records) == set()
    assert duplicate_keys(records) == []
    assert all(r.content.strip() for r in records)  # the ingestor drops empty units


def test_nanobot_naive_times_are_local(fixtures_dir, shanghai):
    path = fixtures_dir / "nanobot/marmotworks/cli_direct.jsonl"
    _, records, _ = parse_fixture(path, fixtures_dir, ADAPTER)
    first = records[0]
    assert (first.role, first.content) == ("user", "Howdy")
    # "2026-02-21T14:59:05.625104" written in UTC+8 = 06:59:05.625104Z
    assert first.ts == 1771657145.625104


def test_nanobot_feb_2026_reasoning_and_tools_used(fixtures_dir):
    _, records, _ = parse_fixture(
        fixtures_dir / "nanobot/marmotworks/cli_direct.jsonl", fixtures_dir, ADAPTER
    )
    replies = [r for r in records if r.role == "assistant"]
    assert not any("</think>" in r.content for r in replies)
    assert replies[0].content.startswith("Howdy! I'm nanobot")
    assert replies[1].meta["tools_used"] == ["read_file", "read_file", "read_file", "edit_file"]


def test_nanobot_tool_calls(fixtures_dir):
    _, records, _ = parse_fixture(
        fixtures_dir / "nanobot/nurlingo/cli_direct.jsonl", fixtures_dir, ADAPTER
    )
    call = next(r for r in records if r.kind == "tool_call")
    result = next(r for r in records if r.kind == "tool_result" and r.related_id == call.related_id)
    assert call.tool_name == result.tool_name == "mcp_lms_lms_labs"
    assert call.content == "mcp_lms_lms_labs()"
    assert all(r.content for r in records if r.kind == "message")


def test_nanobot_workspace_is_the_folder_holding_sessions(fixtures_dir, tmp_path):
    dest = tmp_path / "workspace" / "sessions" / "cli_direct.jsonl"
    dest.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / "nanobot/KamilDV/cli_direct.jsonl", dest)
    state, records, _ = parse_fixture(dest, tmp_path)  # detect() picks nanobot
    assert state["session_id"] == "workspace/sessions/cli_direct"
    assert {r.project for r in records} == {str(tmp_path / "workspace")}


def test_nanobot_ids_survive_a_rewrite(fixtures_dir):
    """nanobot rewrites the whole file on save: re-reading gives the same ids."""
    path = fixtures_dir / "nanobot/KamilDV/cli_direct.jsonl"
    _, first, _ = parse_fixture(path, fixtures_dir, ADAPTER)
    _, second, _ = parse_fixture(path, fixtures_dir, ADAPTER)
    assert [r.record_id for r in first] == [r.record_id for r in second]


def test_nanobot_missing_fields_get_defaults():
    state = ADAPTER.start(Path("root/x.jsonl"), Path("root"))
    (rec,) = ADAPTER.parse_line({"role": "user", "content": "hi"}, state)
    assert (rec.content, rec.ts, session_of(rec, state), rec.project) == ("hi", None, "x", "root")
    (res,) = ADAPTER.parse_line({"role": "tool", "content": "out"}, state)
    assert (res.kind, res.related_id, res.tool_name) == ("tool_result", None, None)


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "x",
        {"_type": "metadata"},
        {"_type": "provider_state", "state": {}},
        {"role": 1, "content": "x"},
        {"role": "user", "content": None},
        {"role": "assistant", "content": "thinking only</think>"},
        {"role": "assistant", "content": "", "tool_calls": "x"},
        {"role": "assistant", "tool_calls": [None, 3]},
    ],
)
def test_nanobot_garbage_shapes_yield_nothing(obj):
    state = ADAPTER.start(Path("x.jsonl"), Path("."))
    assert ADAPTER.parse_line(obj, state) == []
    json.dumps(state)
