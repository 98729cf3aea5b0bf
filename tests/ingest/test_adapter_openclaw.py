"""OpenClaw adapter against fixtures/sessions/openclaw/agents/*/sessions/*.jsonl."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memoryd.ingest.adapters.openclaw import ADAPTER
from tests.ingest.transcripts import (
    duplicate_keys,
    parse_fixture,
    read_first_line,
    session_of,
    unit_counts,
    unpaired_calls,
)

MAIN = "main/sessions/1388a5a9-1d7b-4d24-abbf-594db52661bc.jsonl"
BUILD = "build/sessions/006e7506-e899-4bac-8dd6-c432f5728831.jsonl"
TRIAGE = "email-triage/sessions/e39b82ce-4b67-4caa-9395-6311ce778717.jsonl"
# file -> (project, units per role)
CASES = {
    MAIN: ("/home/bill/.openclaw/workspace", {"user": 1, "assistant": 51, "tool": 49}),
    BUILD: ("/home/bill/.openclaw/workspace-build", {"user": 1, "assistant": 1, "tool": 1}),
    TRIAGE: ("/home/bill/.openclaw/workspace-email-triage", {"user": 1, "assistant": 1}),
}


def parse(fixtures_dir: Path, name: str):
    return parse_fixture(fixtures_dir / "openclaw/agents" / name, fixtures_dir, ADAPTER)


@pytest.mark.parametrize("name", sorted(CASES))
def test_openclaw_fixture_sessions_and_counts(fixtures_dir, name):
    project, roles = CASES[name]
    state, records, bad = parse(fixtures_dir, name)
    assert bad == 0
    assert {session_of(r, state) for r in records} == {Path(name).stem}
    assert {r.project for r in records} == {project}
    assert unit_counts(records) == roles
    assert unpaired_calls(records) == set()
    assert duplicate_keys(records) == []
    assert all(r.content.strip() for r in records)  # the ingestor drops empty units


def test_openclaw_entry_ids_and_times(fixtures_dir):
    _, records, _ = parse(fixtures_dir, MAIN)
    first = records[0]
    assert (first.role, first.record_id) == ("user", "64e05674")
    assert first.content.startswith("[cron:d67a0e1d-225d-4e79-aaf7-42ae614ab120 Evening Digest]")
    assert first.ts == 1771210800.141  # entry timestamp 2026-02-16T03:00:00.141Z
    calls = [r for r in records if r.kind == "tool_call"]
    assert calls[0].record_id == "toolu_01WvGDpFzForKGEq3YX82Rjc"


def test_openclaw_silent_replies_are_skipped(fixtures_dir):
    for name in (MAIN, BUILD):
        _, records, _ = parse(fixtures_dir, name)
        assert not any("NO_REPLY" in r.content for r in records if r.role == "assistant")
        assert not any(r.content == "" for r in records if r.kind == "message")
    _, records, _ = parse(fixtures_dir, BUILD)
    assert [r.kind for r in records if r.role == "assistant"] == ["tool_call"]


def test_openclaw_reply_tag_error_messages_and_compaction():
    state = ADAPTER.start(Path("a/agents/main/sessions/x.jsonl"), Path("a"))
    tagged = {
        "type": "message",
        "id": "e1",
        "timestamp": "2026-03-08T13:03:00.000Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "[[reply_to_current]] Sure, done."}],
            "stopReason": "stop",
        },
    }
    (rec,) = ADAPTER.parse_line(tagged, state)
    assert rec.content == "Sure, done."
    failed = {
        "type": "message",
        "id": "e2",
        "message": {
            "role": "assistant",
            "content": [],
            "stopReason": "error",
            "errorMessage": "429",
        },
    }
    assert ADAPTER.parse_line(failed, state) == []
    (summary,) = ADAPTER.parse_line(
        {
            "type": "compaction",
            "id": "e3",
            "summary": "Bill asked for a digest",
            "firstKeptEntryId": "e1",
            "tokensBefore": 9,
        },
        state,
    )
    assert (summary.kind, summary.record_id, summary.content) == (
        "compaction",
        "e3",
        "Bill asked for a digest",
    )


@pytest.mark.parametrize(
    ("name", "claimed"),
    [
        ("1388a5a9-1d7b-4d24-abbf-594db52661bc.jsonl", True),
        ("1388a5a9-1d7b-4d24-abbf-594db52661bc-topic-42.jsonl", True),
        ("1388a5a9-1d7b-4d24-abbf-594db52661bc.jsonl.reset.2026-02-16T03:00:00.000Z", False),
        ("1388a5a9-1d7b-4d24-abbf-594db52661bc.jsonl.deleted.2026-02-16T03:00:00.000Z", False),
        ("1388a5a9-1d7b-4d24-abbf-594db52661bc.jsonl.bak-123-456", False),
        (
            "1388a5a9-1d7b-4d24-abbf-594db52661bc.checkpoint.6f1c2a9e-0000-4000-8000-000000000000.jsonl",
            False,
        ),
        ("1388a5a9-1d7b-4d24-abbf-594db52661bc.trajectory.jsonl", False),
        ("sessions.json", False),
    ],
)
def test_openclaw_claims_live_transcripts_only(fixtures_dir, tmp_path, name, claimed):
    dest = tmp_path / "agents" / "main" / "sessions" / name
    dest.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / "openclaw/agents" / MAIN, dest)
    assert ADAPTER.claims(dest, tmp_path, read_first_line(dest)) is claimed


def test_openclaw_topic_file_is_its_own_session(fixtures_dir, tmp_path):
    dest = (
        tmp_path
        / "agents"
        / "main"
        / "sessions"
        / "1388a5a9-1d7b-4d24-abbf-594db52661bc-topic-42.jsonl"
    )
    dest.parent.mkdir(parents=True)
    shutil.copy(fixtures_dir / "openclaw/agents" / MAIN, dest)
    state, records, _ = parse_fixture(dest, tmp_path)
    assert {session_of(r, state) for r in records} == {
        "1388a5a9-1d7b-4d24-abbf-594db52661bc-topic-42"
    }


def test_openclaw_not_claimed_outside_agent_sessions(fixtures_dir):
    path = fixtures_dir / "pi/large-session.jsonl"
    assert not ADAPTER.claims(path, fixtures_dir, read_first_line(path))


def test_openclaw_missing_fields_get_defaults():
    state = ADAPTER.start(Path("s.jsonl"), Path("."))
    (rec,) = ADAPTER.parse_line(
        {"type": "message", "message": {"role": "user", "content": "hi"}}, state
    )
    assert (rec.ts, rec.project, session_of(rec, state), rec.record_id[:2]) == (
        None,
        None,
        "s",
        "h:",
    )


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "x",
        {"type": "custom", "customType": "model-snapshot", "data": {}},
        {"type": "custom", "customType": "openclaw.cache-ttl"},
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "NO_REPLY"}]},
        },
        {
            "type": "message",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "\n\n"}]},
        },
        {"type": "message", "message": {"role": "custom", "content": "injected"}},
    ],
)
def test_openclaw_garbage_shapes_yield_nothing(obj):
    state = ADAPTER.start(Path("s.jsonl"), Path("."))
    assert ADAPTER.parse_line(obj, state) == []
    json.dumps(state)
