"""The ingestor against real files and a real store: increments, rewrites, bad input."""

from __future__ import annotations

import json
import logging
import os

import pytest

from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.redact import Redactor
from tests.helpers import write_jsonl


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    return d


def m(i, text=None, **kw):
    return {
        "role": "user" if i % 2 == 0 else "assistant",
        "content": text or f"message {i}",
        "id": f"r{i}",
        **kw,
    }


async def units(store):
    return await store.read(
        lambda c: [tuple(r) for r in c.execute("SELECT record_id, content FROM units ORDER BY id")]
    )


async def bad_lines(store, path):
    return await store.read(
        lambda c: c.execute("SELECT bad_lines FROM files WHERE path = ?", (str(path),)).fetchone()[
            0
        ]
    )


async def test_incremental_reads_only_new_lines(ingestor, store, root):
    f = root / "s.jsonl"
    write_jsonl(f, [m(0), m(1)])
    assert await ingestor.ingest_file(f, root, "generic") == 2
    assert await ingestor.ingest_file(f, root, "generic") == 0
    write_jsonl(f, [m(2)])
    assert await ingestor.ingest_file(f, root, "generic") == 1
    assert [u[0] for u in await units(store)] == ["r0", "r1", "r2"]


async def test_secrets_are_redacted_before_storage(ingestor, store, root):
    f = root / "s.jsonl"
    write_jsonl(f, [m(0, "my key is sk-abcdefghijklmnopqrstuvwxyz0123 keep it")])
    await ingestor.ingest_file(f, root, "generic")
    ((_, content),) = await units(store)
    assert "sk-abc" not in content and "[REDACTED]" in content
    raw = store.path.read_bytes() + store.path.with_name("memoryd.db-wal").read_bytes()
    assert b"sk-abcdefghijklmnopqrstuvwxyz0123" not in raw


async def test_invalid_json_lines_are_skipped_counted_logged(ingestor, store, root, caplog):
    f = root / "s.jsonl"
    f.write_text(json.dumps(m(0)) + "\n{not json\n" + json.dumps(m(1)) + "\n\n[1,2\n")
    with caplog.at_level(logging.WARNING):
        assert await ingestor.ingest_file(f, root, "generic") == 2
    assert await bad_lines(store, f) == 2
    assert f"{f}:2: skipped bad line: invalid JSON" in caplog.text
    write_jsonl(f, [m(2)])
    assert await ingestor.ingest_file(f, root, "generic") == 1
    assert await bad_lines(store, f) == 2  # not counted twice


async def test_huge_line_is_skipped_without_stopping_the_file(store, root, caplog):
    ing = Ingestor(store, Redactor(), max_line_bytes=16 << 20)
    f = root / "s.jsonl"
    huge = json.dumps(m(1, "x" * (50 << 20)))
    f.write_text(json.dumps(m(0)) + "\n" + huge + "\n" + json.dumps(m(2)) + "\n")
    del huge
    with caplog.at_level(logging.WARNING):
        assert await ing.ingest_file(f, root, "generic") == 2
    assert [u[0] for u in await units(store)] == ["r0", "r2"]
    assert await bad_lines(store, f) == 1
    assert f"{f}:2: skipped bad line: line of" in caplog.text


async def test_binary_and_unknown_files_are_ignored(ingestor, store, root):
    (root / "blob.jsonl").write_bytes(os.urandom(4096).replace(b"\n", b"") + b"\n")
    (root / "other.json").write_text('{"some": "config"}\n')
    (root / "empty.jsonl").write_text("")
    for name in ("blob.jsonl", "other.json", "empty.jsonl"):
        assert await ingestor.ingest_file(root / name, root, "auto") == 0
    assert await units(store) == []
    ignored = await store.read(
        lambda c: c.execute("SELECT count(*) FROM files WHERE agent IS NULL").fetchone()[0]
    )
    assert ignored == 2  # the empty file is not decided yet


async def test_binary_garbage_inside_a_transcript(ingestor, store, root):
    f = root / "s.jsonl"
    with open(f, "wb") as fh:
        fh.write(json.dumps(m(0)).encode() + b"\n\xff\xfe\x00garbage\x80\n")
        fh.write(json.dumps(m(1)).encode() + b"\n")
    assert await ingestor.ingest_file(f, root, "generic") == 2
    assert await bad_lines(store, f) == 1


async def test_unreadable_path_is_an_error_not_a_crash(ingestor, store, root):
    d = root / "dir.jsonl"  # a directory where a file was: open() fails with an OSError
    d.mkdir()
    assert await ingestor.ingest_file(d, root, "generic") == 0
    assert ingestor.stats.errors == 1 and "dir.jsonl" in ingestor.stats.last_error
    f = root / "locked.jsonl"
    write_jsonl(f, [m(0)])
    f.chmod(0)
    try:
        # as root the mode does not stop reading; otherwise this is a permission error
        await ingestor.ingest_file(f, root, "generic")
        assert ingestor.stats.errors == (1 if os.geteuid() == 0 else 2)
    finally:
        f.chmod(0o600)


async def test_vanished_file_is_forgotten_quietly(ingestor, store, root):
    f = root / "s.jsonl"
    write_jsonl(f, [m(0)])
    await ingestor.ingest_file(f, root, "generic")
    f.unlink()
    assert await ingestor.ingest_file(f, root, "generic") == 0
    assert ingestor.stats.errors == 0
    gone = await store.read(lambda c: c.execute("SELECT gone FROM files").fetchone()[0])
    assert gone == 1
    assert len(await units(store)) == 1  # memoryd's copy outlives the agent's file


async def test_truncation_and_rewrite_are_reread_without_duplicates(ingestor, store, root):
    f = root / "s.jsonl"
    write_jsonl(f, [m(0), m(1), m(2)])
    await ingestor.ingest_file(f, root, "generic")
    write_jsonl(f, [m(0), m(1)], mode="w")  # truncated (shorter)
    assert await ingestor.ingest_file(f, root, "generic") == 0
    # rewritten in place, same length prefix changed, plus one new message
    write_jsonl(f, [m(0, "message 0"), m(1, "message 1"), m(3, "brand new")], mode="w")
    assert await ingestor.ingest_file(f, root, "generic") == 1
    assert [u[0] for u in await units(store)] == ["r0", "r1", "r2", "r3"]


async def test_replaced_file_new_inode_nanobot_style(ingestor, store, root):
    f = root / "cli_direct.jsonl"
    meta = {"_type": "metadata", "key": "cli:direct", "created_at": "2026-03-01T10:00:00"}
    rows = [{"role": "user", "content": "hello nanobot", "timestamp": "2026-03-01T10:00:01"}]
    write_jsonl(f, [meta, *rows], mode="w")
    await ingestor.ingest_file(f, root, "auto")
    rows.append({"role": "assistant", "content": "hi there", "timestamp": "2026-03-01T10:00:02"})
    tmp = root / ".cli_direct.jsonl.0123456789abcdef.tmp"
    write_jsonl(tmp, [meta, *rows], mode="w")
    os.replace(tmp, f)  # what nanobot does on every save
    assert await ingestor.ingest_file(f, root, "auto") == 1
    assert len(await units(store)) == 2


async def test_renamed_file_is_not_ingested_twice(ingestor, store, root):
    # OpenClaw renames a transcript on reset; the agent's own session id and record
    # ids make the renamed copy a replay
    cc = root / "cc.jsonl"
    line = {
        "type": "user",
        "uuid": "u-1",
        "sessionId": "sess-1",
        "cwd": "/p",
        "timestamp": "2026-01-01T00:00:00Z",
        "parentUuid": None,
        "message": {"role": "user", "content": "rename me"},
    }
    write_jsonl(cc, [line])
    assert await ingestor.ingest_file(cc, root, "auto") == 1
    cc2 = root / "cc.jsonl.reset.2026-01-02T00-00-00Z.jsonl"
    os.rename(cc, cc2)
    assert await ingestor.ingest_file(cc2, root, "claude-code") == 0


async def test_batches_commit_units_with_their_cursor(store, root, monkeypatch):
    import memoryd.ingest.ingestor as mod

    monkeypatch.setattr(mod, "BATCH_ITEMS", 10)
    f = root / "s.jsonl"
    write_jsonl(f, [m(i) for i in range(55)])
    ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
    assert await ing.ingest_file(f, root, "generic") == 55
    cursor = await store.read(lambda c: c.execute("SELECT offset FROM files").fetchone()[0])
    assert cursor == f.stat().st_size
    assert len(await units(store)) == 55


async def test_gemini_legacy_document_rewritten_is_read_again(ingestor, store, root,
                                                               fixtures_dir):
    src = fixtures_dir / "gemini-cli" / "chats" / "session-2025-12-01T21-45-5b959dae.json"
    f = root / "chats" / src.name
    f.parent.mkdir()
    doc = json.loads(src.read_text())
    last = doc["messages"].pop()
    f.write_text(json.dumps(doc, indent=2))
    first = await ingestor.ingest_file(f, root, "gemini-cli")
    assert first > 0
    doc["messages"].append(last)  # Gemini rewrites the whole document on every update
    f.write_text(json.dumps(doc, indent=2))
    assert await ingestor.ingest_file(f, root, "gemini-cli") >= 1
    again = await ingestor.ingest_file(f, root, "auto")
    assert again == 0
    assert await bad_lines(store, f) == 0


async def test_unread_bytes_counts_files_not_read_yet(ingestor, root):
    f = root / "s.jsonl"
    write_jsonl(f, [m(0), m(1)])
    assert ingestor.unread_bytes([f]) == f.stat().st_size
    await ingestor.ingest_file(f, root, "generic")
    assert ingestor.unread_bytes([f]) == 0
    with open(f, "a") as fh:
        fh.write(json.dumps(m(2)) + "\n")
    assert ingestor.unread_bytes() == len(json.dumps(m(2))) + 1


async def test_a_file_read_after_the_unread_view_counts_once(ingestor, root):
    """CI saw a backfill of three files report four files' bytes: the unread count ran in
    a thread while the loop read a file, then the read bytes were counted from the live
    map. Both now come from one `unread_view` copy, so read + unread is the whole file
    whenever the read happens."""
    from memoryd.ingest.backfill import offsets, read_paths_since

    files = [root / f"s{i}.jsonl" for i in range(3)]
    for f in files:
        write_jsonl(f, [m(0), m(1)])
    total = sum(f.stat().st_size for f in files)
    baseline = offsets(ingestor.seen)
    await ingestor.ingest_file(files[0], root, "generic")
    seen, todo = ingestor.unread_view(files[1:])
    await ingestor.ingest_file(files[1], root, "generic")  # read between view and count
    unread = ingestor.unread_bytes(todo, seen)
    _, read = read_paths_since(baseline, seen)
    assert read + unread == total
    assert ingestor.unread_bytes(files[2:]) == files[2].stat().st_size  # the live map moved on
