"""Compaction at open (`memoryd.store.compact`): a database written in 16 KiB pages is
rewritten once in 32 KiB pages, the free pages a dropped table left (m005's FTS5 copy)
are given back, and a database another process holds, or a disk without room for the
rewrite, is left as it is until a later start."""

import logging
import sqlite3
from collections import namedtuple

import pytest

import memoryd.store as store_mod
import memoryd.store.compact as compact_mod
import memoryd.store.db as db_mod
from memoryd.index import Filters
from memoryd.models import Record
from memoryd.daemon.store_index import open_store
from memoryd.store.migrations import MIGRATIONS, migrate
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record

ROWS = 400


def text(i: int) -> str:
    return f"line {i} 中文 about the heron " + "payload " * (i % 50) * 20


def put(c):
    pk = session_pk(c, "generic", "s", project="/p")
    for i in range(ROWS):
        store_record(c, pk, Record("user" if i % 2 else "assistant", text(i)), f"r{i}", None,
                     0)


def on_disk(path):
    """page size, journal mode, free pages, integrity, and every unit's row."""
    conn = sqlite3.connect(path)
    try:
        return (conn.execute("PRAGMA page_size").fetchone()[0],
                conn.execute("PRAGMA journal_mode").fetchone()[0],
                conn.execute("PRAGMA freelist_count").fetchone()[0],
                conn.execute("PRAGMA integrity_check").fetchone()[0],
                conn.execute("SELECT id, session_pk, record_id, seq, role, content FROM units "
                             "ORDER BY id").fetchall())
    finally:
        conn.close()


async def write_old(path, monkeypatch):
    """A database as the code before wrote it: 16 KiB pages, no compaction."""
    with monkeypatch.context() as m:
        m.setattr(db_mod, "PAGE_SIZE", 16384)
        m.setattr(store_mod, "PAGE_SIZE", 16384)
        s = await open_store(path)
        try:
            await s.write(put)
            await s.indexed()
        finally:
            await s.close()
    page, mode, _, ok, rows = on_disk(path)
    assert (page, mode, ok, len(rows)) == (16384, "wal", "ok", ROWS)
    return rows


async def heron_hits(s) -> int:
    total, _ = await s.read(lambda c: s.index.candidates(
        c, ["heron"], Filters(), mode="or", limit=5, count=True))
    return total


async def open_and_search(path) -> None:
    """Open the store at `path` (compacting it when due), find every unit, close it."""
    s = await open_store(path)
    try:
        assert await heron_hits(s) == ROWS
    finally:
        await s.close()


async def test_a_database_of_16k_pages_is_rewritten_once_in_32k_pages(tmp_path, monkeypatch,
                                                                      caplog):
    path = tmp_path / "memoryd.db"
    rows = await write_old(path, monkeypatch)
    caplog.set_level(logging.INFO, logger="memoryd.store.compact")
    s = await open_store(path)
    try:
        assert await heron_hits(s) == ROWS
        await s.write(lambda c: store_record(
            c, session_pk(c, "generic", "s"), Record("user", "one more heron"), "r-new",
            None, 0))
    finally:
        await s.close()
    assert "compacted (page size 16384 -> 32768)" in caplog.text
    page, mode, free, ok, after = on_disk(path)
    assert (page, mode, free, ok) == (32768, "wal", 0, "ok")
    assert after[:ROWS] == rows and after[-1][2] == "r-new"
    caplog.clear()
    s = await open_store(path)  # once: nothing to do now
    await s.close()
    assert "compacted" not in caplog.text


async def test_the_pages_fts5_left_are_given_back(tmp_path, monkeypatch, caplog):
    """A home from before m005: its FTS5 table held a copy of every unit's text; m005
    drops it, and the file gives those pages back at the same start."""
    monkeypatch.setattr(compact_mod, "FREE_MIN_BYTES", 1 << 20)
    path = tmp_path / "memoryd.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA page_size=32768")  # the page size is not why, here
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for m in MIGRATIONS[:4]:  # m001..m004: units_fts exists
        conn.execute("BEGIN")
        m(conn)
        conn.execute("INSERT INTO _migrations VALUES (?, 0)", (m.__name__,))
        conn.execute("COMMIT")
    conn.execute("BEGIN")  # what the code of then wrote: units, and each one's text again
    conn.execute("INSERT INTO sessions (agent, session_id, project, created_at, updated_at) "
                 "VALUES ('generic', 's', '/p', 0, 0)")
    conn.executemany(
        "INSERT INTO units (session_pk, record_id, seq, turn, role, kind, content, chars, "
        "tokens) VALUES (1, ?, ?, 0, ?, 'message', ?, 0, 0)",
        [(f"r{i}", i + 1, "user" if i % 2 else "assistant", text(i)) for i in range(ROWS)])
    conn.execute("INSERT INTO units_fts (rowid, body) SELECT id, content || ' ' || content "
                 "FROM units")
    conn.execute("COMMIT")
    conn.close()
    before = path.stat().st_size
    caplog.set_level(logging.INFO, logger="memoryd.store.compact")
    await open_and_search(path)
    assert "MB of free pages" in caplog.text
    page, mode, free, ok, rows = on_disk(path)
    assert (mode, free, ok, len(rows)) == ("wal", 0, "ok", ROWS)
    assert path.stat().st_size < before * 0.6


async def test_a_database_another_process_holds_is_compacted_at_a_later_start(
        tmp_path, monkeypatch, caplog):
    path = tmp_path / "memoryd.db"
    rows = await write_old(path, monkeypatch)
    holder = sqlite3.connect(path)
    holder.execute("SELECT count(*) FROM units").fetchone()
    try:
        await open_and_search(path)
    finally:
        holder.close()
    assert "not compacted (page size 16384 -> 32768): database is locked" in caplog.text
    assert on_disk(path)[:2] == (16384, "wal")
    s = await open_store(path)
    await s.close()
    assert on_disk(path) == (32768, "wal", 0, "ok", rows)


async def test_without_room_for_the_rewrite_the_database_is_left_as_it_is(
        tmp_path, monkeypatch, caplog):
    path = tmp_path / "memoryd.db"
    rows = await write_old(path, monkeypatch)
    usage = namedtuple("usage", "total used free")
    # a disk with less free space than two copies of the file (the only way to have one
    # in a test is to say so where the code asks)
    monkeypatch.setattr(compact_mod.shutil, "disk_usage",
                        lambda p: usage(1 << 40, 1 << 40, path.stat().st_size))
    await open_and_search(path)
    assert "not compacted (page size 16384 -> 32768)" in caplog.text
    assert "MB free, the rewrite needs" in caplog.text
    assert on_disk(path) == (16384, "wal", 0, "ok", rows)


@pytest.mark.parametrize("pages,why", [
    ((16384, 100, 0), "page size 16384 -> 32768"),
    ((32768, 10_000, 9_000), "295 MB of free pages"),
    ((32768, 10_000, 1_000), None),  # 33 MB free: under FREE_MIN_BYTES
    ((32768, 100_000, 10_000), None),  # 328 MB free, 10% of the file
    ((65536, 100, 0), None),  # a larger page size is kept
])
def test_why_compact(pages, why):
    assert compact_mod.why_compact(compact_mod.Layout(*pages), 32768) == why


def test_a_new_database_gets_32k_pages(tmp_path):
    conn = db_mod.connect(tmp_path / "new.db")
    migrate(conn)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == 32768
    conn.close()
