"""Gemini CLI adapters against fixtures/sessions/gemini-cli (legacy document) and a JSONL
upsert log rebuilt from it the way chatRecordingService writes one."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from memoryd.ingest.adapters.gemini_cli import ADAPTER, DOCUMENT_ADAPTER
from tests.ingest.transcripts import (
    duplicate_keys,
    parse_fixture,
    read_first_line,
    session_of,
    unit_counts,
    unpaired_calls,
)

LEGACY = "gemini-cli/chats/session-2025-12-01T21-45-5b959dae.json"
SESSION = "5b959dae-8655-4cd1-b10f-720b8c336ea2"


def test_gemini_legacy_document(fixtures_dir):
    path = fixtures_dir / LEGACY
    assert DOCUMENT_ADAPTER.whole_file and DOCUMENT_ADAPTER.claims(
        path, fixtures_dir, read_first_line(path)
    )
    state, records, bad = parse_fixture(path, fixtures_dir, DOCUMENT_ADAPTER)
    assert bad == 0
    assert {session_of(r, state) for r in records} == {SESSION}
    assert {r.project for r in records} == {None}  # only a projectHash in this shape
    assert unit_counts(records) == {"user": 3, "assistant": 13, "tool": 10}
    assert unpaired_calls(records) == set()
    assert duplicate_keys(records) == []
    assert all(r.content.strip() for r in records)  # the ingestor drops empty units
    assert all(r.merge == "replace" for r in records)
    first = records[0]
    assert (first.role, first.content, first.record_id) == (
        "user",
        "hi",
        "aa4e1408-dfa9-4337-8768-70d6d3f17129",
    )
    assert first.ts == 1764625534.362  # 2025-12-01T21:45:34.362Z


def test_gemini_tool_records(fixtures_dir):
    _, records, _ = parse_fixture(fixtures_dir / LEGACY, fixtures_dir, DOCUMENT_ADAPTER)
    call = next(r for r in records if r.kind == "tool_call")
    result = next(r for r in records if r.kind == "tool_result")
    assert call.record_id == "list_directory-1764625554423-6b5d2c6179cc4" == result.related_id
    folder = "/Users/Jane_Smith/Documents/projects/epm-cdme/assistants"
    assert call.content == f'list_directory({{"dir_path":"{folder}/"}})'
    assert result.tool_name == "list_directory"
    assert result.content.startswith(f"Directory listing for {folder}:")


def test_gemini_logs_json_is_not_a_transcript(fixtures_dir):
    path = fixtures_dir / "gemini-cli/logs.json"
    first = read_first_line(path)
    assert not DOCUMENT_ADAPTER.claims(path, fixtures_dir, first)
    assert not ADAPTER.claims(path, fixtures_dir, first)


def write_jsonl_log(fixtures_dir: Path, dest: Path) -> list[dict]:
    """The legacy session as the JSONL writer would log it: metadata, then every message,
    each gemini message with tool calls appended twice (before and after its results)."""
    doc = json.loads((fixtures_dir / LEGACY).read_text())
    lines: list[dict] = [
        {
            "sessionId": doc["sessionId"],
            "projectHash": doc["projectHash"],
            "startTime": doc["startTime"],
            "lastUpdated": doc["startTime"],
            "kind": "main",
            "directories": ["/Users/Jane_Smith/assistants"],
        }
    ]
    for msg in doc["messages"]:
        if msg.get("toolCalls"):
            pending = copy.deepcopy(msg)
            for call in pending["toolCalls"]:
                call.pop("result", None)
                call.pop("resultDisplay", None)
                call["status"] = "executing"
            lines.append(pending)
        lines.append(msg)
        lines.append({"$set": {"lastUpdated": msg["timestamp"]}})
    lines.append({"$set": {"summary": "Optimise lead instructions"}})
    lines.append({"$rewindTo": doc["messages"][-1]["id"]})
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return lines


def test_gemini_jsonl_upsert_log(fixtures_dir, tmp_path):
    path = tmp_path / "chats" / "session-2025-12-01T21-45-5b959dae.jsonl"
    write_jsonl_log(fixtures_dir, path)
    assert ADAPTER.claims(path, tmp_path, read_first_line(path))
    assert not ADAPTER.whole_file
    state, records, bad = parse_fixture(path, tmp_path, ADAPTER)
    assert bad == 0
    assert state["title"] == "Optimise lead instructions"
    assert {session_of(r, state) for r in records} == {SESSION}
    assert {r.project for r in records} == {"/Users/Jane_Smith/assistants"}
    # the re-appended messages collapse to the same units as the legacy document
    assert unit_counts(records) == {"user": 3, "assistant": 13, "tool": 10}
    assert all(r.merge == "replace" for r in records)
    # last one wins: every call's final record carries its result
    last = {r.record_id: r for r in records}
    assert sum(1 for r in last.values() if r.kind == "tool_result") == 10
    _, legacy, _ = parse_fixture(fixtures_dir / LEGACY, fixtures_dir, DOCUMENT_ADAPTER)
    assert {(r.record_id, r.content) for r in last.values()} == {
        (r.record_id, r.content) for r in legacy
    }


def test_gemini_info_messages_are_system_meta():
    state = ADAPTER.start(Path("s.jsonl"), Path("."))
    (rec,) = ADAPTER.parse_line(
        {
            "id": "m1",
            "type": "info",
            "content": "Request cancelled.",
            "timestamp": "2026-01-01T00:00:00Z",
        },
        state,
    )
    assert (rec.role, rec.kind) == ("system", "meta")
    assert (
        ADAPTER.parse_line(
            {"id": "m2", "type": "gemini", "content": [{"text": "Hi", "thought": True}]}, state
        )
        == []
    )


def test_gemini_missing_fields_get_defaults():
    state = DOCUMENT_ADAPTER.start(Path("session-x.json"), Path("."))
    records = DOCUMENT_ADAPTER.parse_document(
        {"messages": [{"type": "user", "content": [{"text": "hi"}]}]}, state
    )
    (rec,) = records
    assert (rec.role, rec.content, rec.ts, session_of(rec, state)) == (
        "user",
        "hi",
        None,
        "session-x",
    )
    state = ADAPTER.start(Path("s.jsonl"), Path("."))
    (call,) = ADAPTER.parse_line(
        {"id": "g", "type": "gemini", "content": "", "toolCalls": [{"id": "c", "name": "ls"}]},
        state,
    )
    assert (call.kind, call.tool_args, call.content) == ("tool_call", None, "ls()")


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "x",
        1,
        {"$set": "x"},
        {"$rewindTo": "m1"},
        {"type": "user"},
        {"id": "m", "type": 3, "content": "x"},
        {"id": "m", "type": "gemini", "content": None, "toolCalls": "x"},
        {"sessionId": 7},
    ],
)
def test_gemini_garbage_shapes_yield_nothing(obj):
    state = ADAPTER.start(Path("s.jsonl"), Path("."))
    assert ADAPTER.parse_line(obj, state) == []
    assert DOCUMENT_ADAPTER.parse_document(obj, state) == []
    json.dumps(state)
