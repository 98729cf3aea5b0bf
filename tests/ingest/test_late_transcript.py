"""A file whose head is junk is not "no transcript" for good (issue 28 item 11): under a
source named with its agent its valid lines are stored however many bad ones come first,
and an auto-detected file is looked at again when it grows. Real files, a real store."""

from __future__ import annotations

from tests.helpers import write_jsonl


async def _contents(store):
    return await store.read(lambda c: [r[0] for r in c.execute(
        "SELECT content FROM units ORDER BY id")])


def _bad(f, n):
    with f.open("a") as out:
        for i in range(n):
            out.write(f"garbage line {i} {{ not json\n")


def _msgs(a, b):
    return [{"role": "user" if i % 2 else "assistant", "content": f"valid message {i}"}
            for i in range(a, b)]


async def test_issue_28_a_named_source_stores_what_follows_a_junk_head(ingestor, store,
                                                                       tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    f = root / "late.jsonl"
    _bad(f, 150)
    write_jsonl(f, _msgs(0, 5))
    await ingestor.ingest_file(f, root, "generic")
    assert await _contents(store) == [f"valid message {i}" for i in range(5)]
    write_jsonl(f, _msgs(5, 7))  # later appends too
    await ingestor.ingest_file(f, root, "generic")
    assert await _contents(store) == [f"valid message {i}" for i in range(7)]


async def test_issue_28_an_auto_detected_file_is_looked_at_again_when_it_grows(
        ingestor, store, tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    f = root / "grows.jsonl"
    _bad(f, 120)
    write_jsonl(f, [{"note": i} for i in range(4)])  # objects no agent claims
    await ingestor.ingest_file(f, root, "auto")
    assert await _contents(store) == []  # nothing to claim yet
    write_jsonl(f, _msgs(0, 3))
    await ingestor.ingest_file(f, root, "auto")
    assert await _contents(store) == [f"valid message {i}" for i in range(3)]
    write_jsonl(f, _msgs(3, 4))
    await ingestor.ingest_file(f, root, "auto")
    assert await _contents(store) == [f"valid message {i}" for i in range(4)]
