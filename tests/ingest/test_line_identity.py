"""Lines without an id or a time are identified by their place in the file (issue 28 item
10): identical messages stay distinct, and a file read again from the top after a
rewrite stores nothing twice. Real files, a real store."""

from __future__ import annotations

import os

import pytest

from tests.helpers import write_jsonl


async def _contents(store):
    return await store.read(lambda c: [r[0] for r in c.execute(
        "SELECT content FROM units ORDER BY id")])


def _chat() -> list[dict]:
    rows = []
    for i in range(5):
        rows += [{"role": "user", "content": "continue"},
                 {"role": "assistant", "content": f"step {i} done"}]
    return rows


@pytest.mark.parametrize("agent", ["generic", "auto"])
async def test_issue_28_identical_lines_without_id_or_time_are_all_stored(
        ingestor, store, tmp_path, agent):
    root = tmp_path / "src"
    root.mkdir()
    f = root / "chat.jsonl"
    write_jsonl(f, _chat())
    await ingestor.ingest_file(f, root, agent)
    assert (await _contents(store)).count("continue") == 5
    assert len(await _contents(store)) == 10
    # appended later: the same text again is a sixth message
    write_jsonl(f, [{"role": "user", "content": "continue"}])
    await ingestor.ingest_file(f, root, agent)
    assert (await _contents(store)).count("continue") == 6
    # rewritten in place (new inode, same lines): read again, nothing twice
    tmp = root / ".chat.tmp"
    write_jsonl(tmp, [*_chat(), {"role": "user", "content": "continue"}], mode="w")
    os.replace(tmp, f)
    await ingestor.ingest_file(f, root, agent)
    assert len(await _contents(store)) == 11


async def test_issue_28_identical_tool_calls_without_ids_are_two_calls(
        ingestor, store, tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    f = root / "tools.jsonl"
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function",
                            "function": {"name": "ls", "arguments": "{}"}}] * 2}
    write_jsonl(f, [{"role": "user", "content": "look twice"}, call,
                    {"role": "tool", "content": "a.txt"}, {"role": "tool", "content": "a.txt"},
                    call])
    await ingestor.ingest_file(f, root, "generic")
    got = await _contents(store)
    assert got.count("a.txt") == 2 and len(got) == 1 + 2 + 2 + 2


async def test_issue_28_nanobot_lines_without_a_timestamp_stay_distinct(
        ingestor, store, tmp_path):
    root = tmp_path / "ws"
    (root / "sessions").mkdir(parents=True)
    f = root / "sessions" / "cli_direct.jsonl"
    meta = {"_type": "metadata", "key": "cli:direct"}
    write_jsonl(f, [meta, *_chat()])
    await ingestor.ingest_file(f, root, "nanobot")
    assert (await _contents(store)).count("continue") == 5
