"""pi adapter against fixtures/sessions/pi/large-session.jsonl (format v1) and v3 lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.ingest.adapters.pi import ADAPTER
from tests.ingest.transcripts import (
    duplicate_keys,
    parse_fixture,
    session_of,
    unit_counts,
    unpaired_calls,
)

LARGE = "pi/large-session.jsonl"


def test_pi_v1_fixture(fixtures_dir):
    state, records, bad = parse_fixture(fixtures_dir / LARGE, fixtures_dir, ADAPTER)
    assert bad == 0
    assert {session_of(r, state) for r in records} == {"d703a1a9-1b7b-4fb1-b512-c9738b1fe617"}
    assert {r.project for r in records} == {"/Users/badlogic/workspaces/pi-mono"}
    assert unit_counts(records) == {"user": 88, "assistant": 617, "tool": 373}
    assert unpaired_calls(records) == set()
    assert duplicate_keys(records) == []
    assert all(r.content.strip() for r in records)  # the ingestor drops empty units
    assert all(
        r.record_id.startswith(("h:", "toolu_", "result:toolu_")) for r in records
    )  # v1: no entry ids
    first = records[0]
    assert (first.role, first.content) == ("user", "/mode")
    assert first.ts == 1763681581.55  # entry timestamp 2025-11-20T23:33:01.550Z


def test_pi_unexecuted_tool_calls_are_dropped(fixtures_dir):
    """18 toolCall blocks sit in assistant messages that ended in error/aborted; they never
    ran and no toolResult follows. Their text is kept."""
    raw = [json.loads(line) for line in (fixtures_dir / LARGE).read_text().splitlines()]
    blocks = [
        b
        for o in raw
        if o.get("type") == "message" and o["message"]["role"] == "assistant"
        for b in o["message"]["content"]
        if b.get("type") == "toolCall"
    ]
    _, records, _ = parse_fixture(fixtures_dir / LARGE, fixtures_dir, ADAPTER)
    calls = [r for r in records if r.kind == "tool_call"]
    assert len(blocks) - len(calls) == 18
    assert any(
        r.meta.get("stopReason") == "error" and r.content.startswith("There are 77 `chalk` usages")
        for r in records
    )


def v3(tmp_path: Path, entries: list[dict]) -> Path:
    path = (
        tmp_path
        / "--home-u-proj--"
        / "2026-01-02T03-04-05-006Z_11111111-2222-4333-8444-555555555555.jsonl"
    )
    path.parent.mkdir(parents=True)
    header = {
        "type": "session",
        "version": 3,
        "id": "11111111-2222-4333-8444-555555555555",
        "timestamp": "2026-01-02T03:04:05.006Z",
        "cwd": "/home/u/proj",
    }
    path.write_text("".join(json.dumps(e) + "\n" for e in [header, *entries]))
    return path


def test_pi_v3_entries(tmp_path):
    t = "2026-01-02T03:04:06.000Z"
    entries = [
        {
            "type": "message",
            "id": "a1",
            "parentId": None,
            "timestamp": t,
            "message": {"role": "user", "content": "fix it", "timestamp": 1767323046000},
        },
        {
            "type": "message",
            "id": "a2",
            "parentId": "a1",
            "timestamp": t,
            "message": {
                "role": "assistant",
                "stopReason": "toolUse",
                "content": [
                    {"type": "thinking", "thinking": "secret"},
                    {"type": "text", "text": "Reading."},
                    {
                        "type": "toolCall",
                        "id": "call_1",
                        "name": "read",
                        "arguments": {"path": "a.py"},
                    },
                ],
            },
        },
        {
            "type": "message",
            "id": "a3",
            "parentId": "a2",
            "timestamp": t,
            "message": {
                "role": "toolResult",
                "toolCallId": "call_1",
                "toolName": "read",
                "content": [{"type": "text", "text": "print(1)"}],
                "isError": False,
            },
        },
        {
            "type": "message",
            "id": "a4",
            "parentId": "a3",
            "timestamp": t,
            "message": {
                "role": "bashExecution",
                "command": "ls",
                "output": "a.py\n",
                "exitCode": 0,
            },
        },
        {
            "type": "compaction",
            "id": "a5",
            "parentId": "a4",
            "timestamp": t,
            "summary": "Earlier: fixed a.py",
            "firstKeptEntryId": "a3",
            "tokensBefore": 1000,
        },
        {
            "type": "branch_summary",
            "id": "a6",
            "parentId": "a2",
            "timestamp": t,
            "fromId": "a4",
            "summary": "Tried ls",
        },
        {"type": "session_info", "id": "a7", "parentId": "a6", "timestamp": t, "name": "Fix a.py"},
        {
            "type": "custom",
            "id": "a8",
            "parentId": "a7",
            "timestamp": t,
            "customType": "ext",
            "data": {},
        },
    ]
    path = v3(tmp_path, entries)
    state, records, _ = parse_fixture(path, tmp_path)  # detect() picks pi
    assert state["session_id"] == "11111111-2222-4333-8444-555555555555"
    assert state["title"] == "Fix a.py"
    got = [(r.role, r.kind, r.record_id, r.related_id, r.content) for r in records]
    assert got == [
        ("user", "message", "a1", None, "fix it"),
        ("assistant", "message", "a2", None, "Reading."),
        ("assistant", "tool_call", "call_1", "call_1", 'read({"path":"a.py"})'),
        ("tool", "tool_result", "result:call_1", "call_1", "print(1)"),
        ("assistant", "tool_call", "a4", "a4", 'bash({"command":"ls"})'),
        ("tool", "tool_result", "result:a4", "a4", "a.py"),
        ("system", "compaction", "a5", None, "Earlier: fixed a.py"),
        ("system", "compaction", "a6", None, "Tried ls"),
    ]
    assert all(r.project == "/home/u/proj" and r.ts == 1767323046.0 for r in records)


def test_pi_missing_fields_get_defaults():
    state = ADAPTER.start(Path("x.jsonl"), Path("."))
    assert ADAPTER.parse_line({"type": "session"}, state) == []
    (rec,) = ADAPTER.parse_line(
        {
            "type": "message",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}],
                "timestamp": 1767323046000,
            },
        },
        state,
    )
    assert (rec.content, rec.ts, rec.project, session_of(rec, state)) == (
        "hi",
        1767323046.0,
        None,
        "x",
    )
    (res,) = ADAPTER.parse_line({"type": "message", "message": {"role": "toolResult"}}, state)
    assert (res.kind, res.related_id, res.content) == ("tool_result", None, "(no output)")


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "x",
        {"type": "message"},
        {"type": "message", "message": "x"},
        {"type": "message", "message": {"role": 3}},
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": None,
                "stopReason": "error",
                "errorMessage": "boom",
            },
        },
        {"type": "compaction", "summary": None},
        {"type": "model_change", "provider": "x"},
        {"type": "session_info", "name": 5},
        {"type": "message", "message": {"role": "bashExecution", "command": None}},
    ],
)
def test_pi_garbage_shapes_yield_nothing(obj):
    state = ADAPTER.start(Path("x.jsonl"), Path("."))
    assert ADAPTER.parse_line(obj, state) == []
    json.dumps(state)
