"""Generic OpenAI-messages adapter: a benchmark scope (tests/fixtures/lme-dev) and tool lines."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from memoryd.ingest.adapters.generic import ADAPTER
from tests.ingest.transcripts import (
    duplicate_keys,
    parse_fixture,
    read_first_line,
    session_of,
    unit_counts,
    unpaired_calls,
)


@pytest.fixture
def lme_dev(fixtures_dir) -> Path:
    """One scope of the benchmark's dev set, kept in tests/fixtures/lme-dev."""
    return fixtures_dir.parent / "lme-dev"


def test_generic_benchmark_session(lme_dev, monkeypatch):
    path = lme_dev / "06f04340" / "0844dea6.jsonl"
    assert ADAPTER.claims(path, lme_dev, read_first_line(path))
    with monkeypatch.context() as m:
        m.setenv("TZ", "UTC")
        time.tzset()
        try:
            state, records, bad = parse_fixture(path, lme_dev, ADAPTER)
        finally:
            m.undo()
            time.tzset()
    assert bad == 0
    assert {session_of(r, state) for r in records} == {"06f04340/0844dea6"}
    assert {r.project for r in records} == {str(path.parent)}
    assert unit_counts(records) == {"user": 6, "assistant": 6}
    assert [r.record_id for r in records] == [f"06f04340:0844dea6:{i}" for i in range(12)]
    assert (
        records[0].ts == 1684868100.0
    )  # naive "2023-05-23T18:55:00" read as local time (UTC here)


def test_generic_whole_benchmark_scope_parses(lme_dev):
    scope = lme_dev / "06f04340"
    ids: list[str] = []
    for path in sorted(scope.glob("*.jsonl")):
        _, records, bad = parse_fixture(path, lme_dev)  # detect() picks generic
        assert bad == 0
        ids += [r.record_id for r in records]
    lines = [
        json.loads(line)
        for p in sorted(scope.glob("*.jsonl"))
        for line in p.read_text().splitlines()
        if line.strip()
    ]
    assert ids == [line["id"] for line in lines]


def test_generic_qrels_file_is_not_claimed(lme_dev):
    path = lme_dev / "qrels.jsonl"
    assert not ADAPTER.claims(path, lme_dev, read_first_line(path))


def test_generic_tool_calls_header_and_cwd(tmp_path):
    path = tmp_path / "chat.jsonl"
    lines = [
        {"title": "Weather chat", "cwd": "/home/u/proj"},
        {"role": "system", "content": "You are helpful."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Weather in Oslo?"}],
            "timestamp": "2026-01-01T10:00:00Z",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "name": "weather", "content": "-3 C"},
        {"role": "assistant", "content": "It is -3 C.", "id": 42},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert ADAPTER.claims(path, tmp_path, read_first_line(path))
    state, records, _ = parse_fixture(path, tmp_path, ADAPTER)
    assert state["title"] == "Weather chat"
    assert [(r.role, r.kind) for r in records] == [
        ("system", "meta"),
        ("user", "message"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "message"),
    ]
    assert {r.project for r in records} == {"/home/u/proj"}
    assert {session_of(r, state) for r in records} == {"chat"}
    assert records[1].ts == 1767261600.0
    assert (
        records[2].content == 'weather({"city":"Oslo"})'
        and records[2].tool_args == '{"city": "Oslo"}'
    )
    assert records[-1].record_id == "42"
    assert unpaired_calls(records) == set() and duplicate_keys(records) == []


def test_generic_missing_fields_get_defaults():
    state = ADAPTER.start(Path("/data/a/b.jsonl"), Path("/data"))
    (rec,) = ADAPTER.parse_line({"role": "user", "content": "hi"}, state)
    # no id, no time: "" (the ingestor derives the id from the line's place in the file)
    assert (rec.ts, rec.project, session_of(rec, state), rec.record_id) == (
        None,
        "/data/a",
        "a/b",
        "",
    )


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "x",
        {},
        {"role": "user"},
        {"role": "user", "content": None},
        {"role": "robot", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [None]},
        {"title": 3},
    ],
)
def test_generic_garbage_shapes_yield_nothing(obj):
    state = ADAPTER.start(Path("x.jsonl"), Path("."))
    assert ADAPTER.parse_line(obj, state) == []
    json.dumps(state)


def test_a_first_line_whose_role_is_not_a_string_is_not_claimed():
    """Found by test_bad_lines_property: `claims` looked a list role up in a set and
    raised TypeError, so the file could not be read at all."""
    from pathlib import Path

    from memoryd.ingest.adapters.generic import ADAPTER

    for role in ('["user"]', '{"a": 1}', "3", "null"):
        line = f'{{"role": {role}, "content": "hi"}}'.encode()
        assert not ADAPTER.claims(Path("/s/chat.jsonl"), Path("/s"), line)
    assert ADAPTER.claims(Path("/s/chat.jsonl"), Path("/s"), b'{"role": "user", "content": "hi"}')
