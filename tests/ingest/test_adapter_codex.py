"""Codex adapter against the recorded rollouts in fixtures/sessions/codex."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memoryd.ingest.adapters.codex import ADAPTER
from tests.ingest.transcripts import (
    duplicate_keys,
    parse_fixture,
    session_of,
    unit_counts,
    unpaired_calls,
)

CUT_OFF = "2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"
REDACTED = "2026/02/23/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
DESKTOP = "2026/05/11/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
# file -> (session id, project, units per role, call ids without a result)
CASES = {
    CUT_OFF: (
        "019c8a70-dda7-7f33-98ea-f30553347322",
        "/redacted/path/da0ba47443",
        {"user": 1, "assistant": 2},
        {"call_UtYwHmwWekzvq83m8Rb9K8jJ"},
    ),
    REDACTED: (
        "019c8bfe-ec25-79e0-97d7-bda6a9c575ff",
        "/redacted/path/ea96e59ed9",
        {"user": 1, "assistant": 11, "tool": 5},
        set(),
    ),
    DESKTOP: (
        "019e1695-0522-7c83-8b39-0dd379793f80",
        "/Users/Sample_User/naya",
        {"user": 3, "assistant": 41, "tool": 38},
        set(),
    ),
}


def parse(fixtures_dir: Path, name: str):
    return parse_fixture(fixtures_dir / "codex" / name, fixtures_dir, ADAPTER)


@pytest.mark.parametrize("name", sorted(CASES))
def test_codex_fixture_sessions_and_counts(fixtures_dir, name):
    session, project, roles, unanswered = CASES[name]
    state, records, bad = parse(fixtures_dir, name)
    assert bad == 0
    assert {session_of(r, state) for r in records} == {session}
    assert {r.project for r in records} == {project}
    assert unit_counts(records) == roles
    assert unpaired_calls(records) == unanswered
    assert duplicate_keys(records) == []
    assert all(r.content.strip() for r in records)  # the ingestor drops empty units
    assert all(r.ts is not None for r in records)


def test_codex_one_stream_per_kind(fixtures_dir):
    """User text comes from event_msg only: the injected AGENTS.md/environment context in
    response_item user/developer messages never shows up."""
    _, records, _ = parse(fixtures_dir, REDACTED)
    texts = [r.content for r in records if r.kind == "message"]
    assert all(t.startswith("[REDACTED_MESSAGE") for t in texts)  # event_msg text
    assert len(texts) == 7


def test_codex_assistant_text_from_response_items_when_no_events(fixtures_dir):
    _, records, _ = parse(fixtures_dir, DESKTOP)
    replies = [r for r in records if r.role == "assistant" and r.kind == "message"]
    assert [r.meta.get("phase") for r in replies] == ["final_answer"] * 3
    assert replies[0].content.startswith(
        "I analyzed `/Users/Sample_User/Downloads/Sample Project Demo Prep.vtt`."
    )


@pytest.mark.parametrize("tz", ["UTC", "Europe/Moscow", "America/Los_Angeles"])
def test_codex_times_come_from_utc_content_not_the_file_name(fixtures_dir, monkeypatch, tz):
    try:
        with monkeypatch.context() as m:
            m.setenv("TZ", tz)
            time.tzset()
            _, records, _ = parse(fixtures_dir, DESKTOP)
    finally:
        time.tzset()
    first = records[0]
    assert first.role == "user" and first.content.startswith("# Files mentioned by the user:")
    assert (
        first.ts == 1778495380.167
    )  # 2026-05-11T10:29:40.167Z; the file name says 13-28-45 (UTC+3)
    assert datetime.fromtimestamp(first.ts, UTC).hour == 10


def test_codex_tolerates_arguments_that_are_not_json(fixtures_dir):
    _, records, _ = parse(fixtures_dir, CUT_OFF)
    (call,) = [r for r in records if r.kind == "tool_call"]
    assert call.tool_name == "exec_command"
    assert json.loads(call.tool_args or "") == "[REDACTED_ARGUMENTS len=456 sha=df6be51a]"
    assert call.content == "exec_command([REDACTED_ARGUMENTS len=456 sha=df6be51a])"


def test_codex_results_name_their_tool(fixtures_dir):
    _, records, _ = parse(fixtures_dir, DESKTOP)
    calls = {r.related_id: r.tool_name for r in records if r.kind == "tool_call"}
    results = {r.related_id: r.tool_name for r in records if r.kind == "tool_result"}
    assert results == calls
    assert "mcp__node_repl__js" in calls.values()  # namespace + name


def _line(kind: str, payload: dict, ts: str = "2026-01-01T00:00:00.000Z") -> dict:
    return {"timestamp": ts, "type": kind, "payload": payload}


def test_codex_latest_turn_context_cwd_wins_and_compaction():
    state = ADAPTER.start(
        Path("rollout-2026-01-01T00-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"), Path(".")
    )
    assert state["session_id"] == "0199aaaa-0000-7000-8000-000000000001"
    ADAPTER.parse_line(_line("session_meta", {"id": "sid", "cwd": "/a"}), state)
    ADAPTER.parse_line(_line("turn_context", {"cwd": "/b", "model": "gpt-5"}), state)
    (user,) = ADAPTER.parse_line(
        _line("event_msg", {"type": "user_message", "message": "hello"}), state
    )
    assert (user.session_id, user.project) == ("sid", "/b")
    assert (
        ADAPTER.parse_line(_line("compacted", {"message": "", "replacement_history": []}), state)
        == []
    )
    (summary,) = ADAPTER.parse_line(
        _line("compacted", {"message": "Summary of earlier work"}), state
    )
    assert (summary.role, summary.kind, summary.content) == (
        "system",
        "compaction",
        "Summary of earlier work",
    )


def test_codex_assistant_streams_share_an_id():
    """Were the response_item written before its agent_message, both derive one id."""
    state = ADAPTER.start(Path("x.jsonl"), Path("."))
    item = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Done."}],
    }
    (first,) = ADAPTER.parse_line(_line("response_item", item), state)
    (second,) = ADAPTER.parse_line(
        _line("event_msg", {"type": "agent_message", "message": "Done."}), state
    )
    assert first.record_id == second.record_id
    assert ADAPTER.parse_line(_line("response_item", item), state) == []  # events seen: skipped now


def test_codex_custom_tool_and_images():
    state = ADAPTER.start(Path("x.jsonl"), Path("."))
    (call,) = ADAPTER.parse_line(
        _line(
            "response_item",
            {
                "type": "custom_tool_call",
                "call_id": "c1",
                "name": "apply_patch",
                "input": "*** Begin Patch",
            },
        ),
        state,
    )
    (result,) = ADAPTER.parse_line(
        _line(
            "response_item", {"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}
        ),
        state,
    )
    assert call.content == "apply_patch(*** Begin Patch)" and result.tool_name == "apply_patch"
    url = "data:image/png;base64," + "A" * 2048
    (user,) = ADAPTER.parse_line(
        _line("event_msg", {"type": "user_message", "message": "look", "images": [url]}), state
    )
    assert user.content == "look\n[image image/png, 2 KB]"


def test_codex_missing_fields_get_defaults():
    state = ADAPTER.start(Path("weird-name.jsonl"), Path("."))
    (user,) = ADAPTER.parse_line(
        {"type": "event_msg", "payload": {"type": "user_message", "message": "hi"}}, state
    )
    assert (user.ts, user.project, session_of(user, state)) == (None, None, "weird-name")
    (call,) = ADAPTER.parse_line(
        {"type": "response_item", "payload": {"type": "function_call", "name": "f"}}, state
    )
    assert call.tool_args is None and call.related_id is None and call.content == "f()"


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "x",
        {"type": "event_msg"},
        {"type": "event_msg", "payload": "x"},
        {"type": "event_msg", "payload": {"type": "user_message", "message": None}},
        {
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": "injected"},
        },
        {"type": "response_item", "payload": {"type": "reasoning", "summary": []}},
        {"type": "session_meta", "payload": {"id": 5}},
        {"type": "compacted", "payload": {"message": None}},
        {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
    ],
)
def test_codex_garbage_shapes_yield_nothing(obj):
    state = ADAPTER.start(Path("x.jsonl"), Path("."))
    assert ADAPTER.parse_line(obj, state) == []
    json.dumps(state)
