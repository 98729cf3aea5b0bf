"""Issue 8 item 4: a session's identity cannot collide across roots, and a renamed or
moved transcript stays the same session (nothing stored twice)."""

from __future__ import annotations

import os

import pytest

from tests.helpers import write_jsonl


def chat(tag, n=3):
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag} says {i}"}
            for i in range(n)]


def nanobot(tag, n=2, created="2026-03-01T10:00:00"):
    meta = {"_type": "metadata", "key": "cli:direct", "created_at": created}
    return [meta, *({"role": "user" if i % 2 == 0 else "assistant",
                     "content": f"{tag} message {i}",
                     "timestamp": f"2026-03-01T10:00:{i:02d}"} for i in range(n))]


async def sessions(store):
    return await store.read(lambda c: [tuple(r) for r in c.execute(
        "SELECT s.agent, s.session_id, count(u.id) FROM sessions s "
        "LEFT JOIN units u ON u.session_pk = s.id GROUP BY s.id ORDER BY s.id")])


async def test_issue_8_two_generic_roots_with_chat_jsonl_are_two_sessions(ingestor, store,
                                                                          tmp_path):
    r1, r2 = tmp_path / "r1", tmp_path / "r2"
    write_jsonl(r1 / "chat.jsonl", chat("one"))
    write_jsonl(r2 / "chat.jsonl", chat("two"))
    assert await ingestor.ingest_file(r1 / "chat.jsonl", r1, "generic") == 3
    assert await ingestor.ingest_file(r2 / "chat.jsonl", r2, "generic") == 3
    got = await sessions(store)
    assert len(got) == 2 and [n for _, _, n in got] == [3, 3]
    assert got[0][1] == "chat" and got[1][1].startswith("chat@")
    # more lines later go to the session each file started with
    write_jsonl(r2 / "chat.jsonl", [{"role": "user", "content": "two again"}])
    assert await ingestor.ingest_file(r2 / "chat.jsonl", r2, "generic") == 1
    assert [n for _, _, n in await sessions(store)] == [3, 4]


async def test_issue_8_two_nanobot_workspaces_are_two_sessions(ingestor, store, tmp_path):
    w1, w2 = tmp_path / "w1", tmp_path / "w2"
    write_jsonl(w1 / "sessions" / "cli_direct.jsonl", nanobot("alpha"))
    write_jsonl(w2 / "sessions" / "cli_direct.jsonl", nanobot("beta"))
    for w in (w1, w2):
        assert await ingestor.ingest_file(w / "sessions" / "cli_direct.jsonl", w, "auto") == 2
    got = await sessions(store)
    assert [(a, n) for a, _, n in got] == [("nanobot", 2), ("nanobot", 2)]
    assert got[0][1] != got[1][1]


@pytest.mark.parametrize("gone_first", [True, False])
async def test_issue_8_renamed_nanobot_session_is_the_same_session(ingestor, store, tmp_path,
                                                                   gone_first):
    root = tmp_path / "ws"
    old = root / "sessions" / "cli_direct.jsonl"
    write_jsonl(old, nanobot("gamma", 4))
    assert await ingestor.ingest_file(old, root, "auto") == 4
    new = root / "sessions" / "cli_renamed.jsonl"
    os.rename(old, new)
    if gone_first:  # the watcher may see the delete before or after the create
        await ingestor.file_gone(old)
    assert await ingestor.ingest_file(new, root, "auto") == 0
    write_jsonl(new, [{"role": "user", "content": "after the rename",
                       "timestamp": "2026-03-01T11:00:00"}])
    assert await ingestor.ingest_file(new, root, "auto") == 1
    await ingestor.file_gone(old)
    assert [(a, n) for a, _, n in await sessions(store)] == [("nanobot", 5)]
    paths = await store.read(lambda c: [r[0] for r in c.execute(
        "SELECT path FROM files WHERE NOT gone")])
    assert paths == [str(new)]


async def test_issue_8_moved_then_rewritten_file_keeps_its_session(ingestor, store, tmp_path):
    root = tmp_path / "src"
    old = root / "a" / "chat.jsonl"
    write_jsonl(old, chat("delta"))
    await ingestor.ingest_file(old, root, "generic")
    new = root / "b" / "chat.jsonl"
    new.parent.mkdir()
    os.rename(old, new)
    assert await ingestor.ingest_file(new, root, "generic") == 0
    write_jsonl(new, [*chat("delta"), {"role": "user", "content": "rewritten"}], mode="w")
    assert await ingestor.ingest_file(new, root, "generic") == 1
    assert [(s, n) for _, s, n in await sessions(store)] == [("a/chat", 4)]
