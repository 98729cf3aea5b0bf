"""Claude Code adapter against the recorded transcripts in fixtures/sessions/claude-code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.ingest.adapters.claude_code import ADAPTER
from tests.ingest.transcripts import (
    duplicate_keys,
    parse_fixture,
    session_of,
    unit_counts,
    unpaired_calls,
)

MAIN = "4c2ddfdc-b619-4525-8d03-1950fb1b0257"
# file -> (session id, project, stored units per role: distinct record ids)
CASES = {
    "tiny-conversation.jsonl": (
        "67a8478e-78dc-44ab-82ea-f65c8ead85f6",
        "/Users/testuser/Documents/GitHub/projects/example-project/.worktrees/streaming",
        {"user": 2, "assistant": 4, "tool": 1},
    ),
    "short-conversation.jsonl": (
        "982581eb-41b9-46da-86c1-ac34168117a8",
        "/Users/testuser/.worktrees/example-feature/skills/collaboration/remembering-conversations/tool",
        {"user": 1, "assistant": 1},
    ),
    "medium-conversation.jsonl": ("medium-conversation", None, {}),
    f"-tmp-private/{MAIN}.jsonl": (MAIN, "/tmp/private", {"user": 3, "assistant": 10, "tool": 6}),
    "-tmp-private/agent-36541525.jsonl": (
        f"{MAIN}/agent-36541525",
        "/tmp/private",
        {"user": 1, "assistant": 1},
    ),
    "-tmp-private/agent-50243ee8.jsonl": (
        f"{MAIN}/agent-50243ee8",
        "/tmp/private",
        {"user": 1, "assistant": 1},
    ),
    "incremental-simple/turn-1.jsonl": (
        "3fb74381-1bf4-475e-8c6f-442d872b1bcf",
        "/Users/User/repo/codemie-ai/codemie-code",
        {"user": 1, "assistant": 1},
    ),
    "incremental-simple/turn-2.jsonl": (
        "3fb74381-1bf4-475e-8c6f-442d872b1bcf",
        "/Users/User/repo/codemie-ai/codemie-code",
        {"user": 4, "assistant": 8, "tool": 2},
    ),
    "session-624a4a58.jsonl": (
        "624a4a58-b34c-462d-a70d-13421c8125a8",
        "/Users/user/repo",
        {"system": 6, "user": 15, "assistant": 77, "tool": 48},
    ),
    "session-9eda1058.jsonl": (
        "9eda1058-9706-484a-b992-d03f9cfa2546",
        "/Users/user/repo",
        {"user": 3, "assistant": 8, "tool": 3, "system": 1},
    ),
}


def parse(fixtures_dir: Path, name: str):
    return parse_fixture(fixtures_dir / "claude-code" / name, fixtures_dir, ADAPTER)


@pytest.mark.parametrize("name", sorted(CASES))
def test_claude_code_fixture_sessions_and_counts(fixtures_dir, name):
    session, project, roles = CASES[name]
    state, records, bad = parse(fixtures_dir, name)
    assert bad == 0
    assert {session_of(r, state) for r in records} <= {session}
    assert state["session_id"] == session
    assert {r.project for r in records} <= {project}
    assert state.get("project") == project
    assert unit_counts(records) == roles
    assert unpaired_calls(records) == set()
    assert duplicate_keys(records) == []
    assert all(r.content.strip() for r in records)  # the ingestor drops empty units
    assert all(r.ts is not None for r in records)
    assert all(
        r.merge == "append" for r in records if r.role == "assistant" and r.kind == "message"
    )


def test_claude_code_timestamp_is_utc_seconds(fixtures_dir):
    _, records, _ = parse(fixtures_dir, "tiny-conversation.jsonl")
    first = records[0]
    assert first.role == "user" and first.record_id == "963d09c0-9aa2-4d33-a97f-63ea51e9cb3b"
    assert first.ts == 1758303269.181  # 2025-09-19T17:34:29.181Z


def test_claude_code_tool_call_and_result_pair(fixtures_dir):
    _, records, _ = parse(fixtures_dir, "tiny-conversation.jsonl")
    (call,) = [r for r in records if r.kind == "tool_call"]
    (result,) = [r for r in records if r.kind == "tool_result"]
    assert call.record_id == call.related_id == result.related_id
    assert result.record_id == f"result:{call.related_id}"
    assert call.tool_name == result.tool_name
    assert call.content.startswith(f"{call.tool_name}({{")
    assert json.loads(call.tool_args or "null") is not None


def test_claude_code_compaction_and_wrappers(fixtures_dir):
    _, records, _ = parse(fixtures_dir, "session-624a4a58.jsonl")
    (summary,) = [r for r in records if r.kind == "compaction"]
    assert summary.role == "system"
    assert summary.content.startswith(
        "This session is being continued from a previous conversation"
    )
    metas = [r.content for r in records if r.kind == "meta"]
    assert metas[0].startswith("<command-name>/clear</command-name>")
    assert "<local-command-stdout></local-command-stdout>" in metas
    assert metas.count("[Request interrupted by user]") == 3
    texts = [r.content for r in records]
    assert not any(t.startswith("Caveat: The messages below") for t in texts)  # isMeta skipped
    # text queued while the agent worked and injected into the turn ("remove")
    (queued,) = [r for r in records if r.meta.get("queued")]
    assert queued.role == "user" and queued.content.startswith("no, add conversationId field")


def test_claude_code_thinking_is_not_stored(fixtures_dir):
    _, records, _ = parse(fixtures_dir, "incremental-simple/turn-2.jsonl")
    raw = (fixtures_dir / "claude-code/incremental-simple/turn-2.jsonl").read_text()
    thoughts = [
        b["thinking"]
        for line in raw.splitlines()
        for b in (json.loads(line).get("message") or {}).get("content") or []
        if isinstance(b, dict) and b.get("type") == "thinking" and b.get("thinking")
    ]
    assert thoughts
    assert not any(t[:80] in r.content for t in thoughts for r in records)


def test_claude_code_summary_lines_title_only_their_own_conversation(fixtures_dir):
    # the fixtures' summary lines all point (leafUuid) into other files: not our title
    state, records, _ = parse(fixtures_dir, "medium-conversation.jsonl")
    assert records == [] and "title" not in state
    state, _, _ = parse(fixtures_dir, "session-9eda1058.jsonl")
    assert "title" not in state and len(state["pending_titles"]) == 16
    # a summary whose leaf is an entry of this file is the title
    state = ADAPTER.start(Path("/x/s.jsonl"), Path("/x"))
    ADAPTER.parse_line({"type": "summary", "summary": "Fixing the login bug",
                        "leafUuid": "u-2"}, state)
    for uuid in ("u-1", "u-2"):
        ADAPTER.parse_line({"type": "user", "uuid": uuid, "sessionId": "s", "cwd": "/p",
                            "message": {"role": "user", "content": "hi"}}, state)
    assert state["title"] == "Fixing the login bug"


def test_claude_code_custom_title_beats_summary():
    state = ADAPTER.start(Path("s.jsonl"), Path("."))
    ADAPTER.parse_line({"type": "custom-title", "customTitle": "Mine", "sessionId": "s"}, state)
    ADAPTER.parse_line({"type": "summary", "summary": "Auto", "leafUuid": "x"}, state)
    assert state["title"] == "Mine"


def test_claude_code_sidechain_is_its_own_session(fixtures_dir):
    state, records, _ = parse(fixtures_dir, "-tmp-private/agent-36541525.jsonl")
    assert all(r.meta.get("sidechain") for r in records)
    assert state["session_id"] == f"{MAIN}/agent-36541525"


def test_claude_code_split_message_appends_parts_idempotently():
    base = {
        "type": "assistant",
        "sessionId": "s1",
        "cwd": "/p",
        "timestamp": "2026-01-01T00:00:00Z",
    }
    lines = [
        base
        | {
            "uuid": "u1",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "text", "text": "Part one."}],
            },
        },
        base
        | {
            "uuid": "u2",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "hm"}],
            },
        },
        base
        | {
            "uuid": "u3",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "text", "text": "Part two."}],
            },
        },
    ]
    state = ADAPTER.start(Path("s1.jsonl"), Path("."))
    first = [r for line in lines for r in ADAPTER.parse_line(line, state)]
    again = [r for line in lines for r in ADAPTER.parse_line(line, state)]
    assert [(r.record_id, r.part_id, r.content, r.merge) for r in first] == [
        ("msg_1", "u1", "Part one.", "append"),
        ("msg_1", "u3", "Part two.", "append"),
    ]
    assert first == again


def test_claude_code_incremental_read_matches_single_read(fixtures_dir):
    """turn-1 is a byte prefix of turn-2: reading in two pieces with the saved state gives
    the same records as one read."""
    path1 = fixtures_dir / "claude-code/incremental-simple/turn-1.jsonl"
    path2 = fixtures_dir / "claude-code/incremental-simple/turn-2.jsonl"
    prefix = path1.read_bytes()
    whole = path2.read_bytes()
    assert whole.startswith(prefix)
    state = ADAPTER.start(path2, fixtures_dir)
    records = [
        r for line in prefix.splitlines() for r in ADAPTER.parse_line(json.loads(line), state)
    ]
    state = json.loads(json.dumps(state))  # as stored in the cursor row
    records += [
        r
        for line in whole[len(prefix) :].splitlines()
        if line.strip()
        for r in ADAPTER.parse_line(json.loads(line), state)
    ]
    _, at_once, _ = parse(fixtures_dir, "incremental-simple/turn-2.jsonl")
    assert records == at_once


def test_claude_code_images_become_placeholders():
    state = ADAPTER.start(Path("s.jsonl"), Path("."))
    png = "iVBORw0KGgo" + "A" * 4000
    line = {
        "type": "user",
        "uuid": "u",
        "message": {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": png},
                },
            ],
        },
    }
    (record,) = ADAPTER.parse_line(line, state)
    assert record.content == "what is this?\n[image image/png, 3 KB]"


def test_claude_code_missing_fields_get_defaults():
    state = ADAPTER.start(Path("abc.jsonl"), Path("."))
    (record,) = ADAPTER.parse_line({"type": "user", "message": {"content": "hi"}}, state)
    assert (record.role, record.content, record.ts, record.project) == ("user", "hi", None, None)
    assert record.record_id.startswith("h:")
    assert session_of(record, state) == "abc"
    (reply,) = ADAPTER.parse_line(
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "yo"}]}}, state
    )
    assert reply.role == "assistant" and reply.content == "yo"


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "text",
        3,
        {"type": 5},
        {"type": "user"},
        {"type": "user", "message": []},
        {"type": "user", "message": {"content": 7}},
        {"type": "assistant", "message": {"content": [None, 1, {}]}},
        {"type": "summary", "summary": None},
        {"type": "queue-operation", "operation": "remove"},
        {"type": "user", "message": {"content": "x"}, "isMeta": True},
        {"type": "progress", "uuid": "u"},
    ],
)
def test_claude_code_garbage_shapes_yield_nothing(obj):
    state = ADAPTER.start(Path("s.jsonl"), Path("."))
    assert ADAPTER.parse_line(obj, state) == []
    json.dumps(state)
