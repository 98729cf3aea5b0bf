"""Flat memory at rest (issue 11): what a query loads is let go once the daemon rests.

A real store and tantivy index: index pages a search mapped in leave the process's RSS
(and come back on the next search, with the same answers); the tokenizer is dropped and
reloaded with the same counts; the idle timer fires once after the last query, not
while queries keep coming, and never by itself."""

import asyncio
import time

import pytest

from memoryd import tokens
from memoryd.api import SearchRequest
from memoryd.runtime.idle_release import IdleRelease
from memoryd.index import pages
from memoryd.models import Record
from memoryd.recall.search import search
from memoryd.daemon.store_index import open_store
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "m.db")

    def put(c):
        pk = session_pk(c, "generic", "s", project="/p")
        for i in range(3000):
            store_record(c, pk, Record("user", f"note {i} about the deployment of service{i % 97} "
                                       f"with retries and 数据库迁移 step {i * 7}"),
                         f"r{i}", None, 0)

    await s.write(put)
    await s.indexed()
    # at rest: the indexer lets go of its writer a while after its last commit
    deadline = time.monotonic() + 30
    while s.index.has_writer() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    yield s
    await s.close()


def resident_kb(ranges: list[tuple[int, int, str]]) -> int:
    """Resident KB of the given mappings, from /proc/self/smaps."""
    want = {lo for lo, _, _ in ranges}
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                inside = int(head.split("-")[0], 16) in want
            elif inside and head == "Rss:":
                total += int(line.split()[1])
    return total


async def test_index_pages_leave_rss_and_searches_answer_the_same(store):
    before = await search(store, SearchRequest(query="deployment service42 迁移"))
    maps = pages.mappings(store.index.root)
    assert maps, "the index files are mapped by the search"
    assert resident_kb(maps) > 0
    assert store.index.release_pages() > 0
    assert resident_kb(pages.mappings(store.index.root)) == 0
    after = await search(store, SearchRequest(query="deployment service42 迁移"))
    assert [r.unit_id for r in after.results] == [r.unit_id for r in before.results]
    assert after.total == before.total > 0



QUERIES = ["deployment service42 迁移", "retries step", "service7 数据库", "note 1234"]


async def answers(s) -> list[tuple[int, list[int]]]:
    out = []
    for q in QUERIES:
        r = await search(s, SearchRequest(query=q))
        out.append((r.total, [hit.unit_id for hit in r.results]))
    return out


async def test_searches_answer_the_same_after_the_stores_release(store):
    """The store's part of the release (`Store.release_caches`: each connection's page
    cache, on the connection's own thread, and the WAL): searches answer the same
    afterwards, their pages read again."""
    before = await answers(store)
    assert all(total > 0 and ids for total, ids in before)
    release = IdleRelease(after_s=60)  # the daemon registers it so (memoryd.daemon)
    release.register(store.release_caches)
    release.release_now()
    assert release.runs == 1
    assert await answers(store) == before


async def test_an_sqlite_store_keeps_no_copy_of_the_hits_it_served(store):
    # the hits served last answer only while a shared (fleet) database is unreachable;
    # kept in SQLite mode they held ~14 MB at rest after 1,000 distinct searches at 1M
    await answers(store)
    assert len(store.index.recent) == 0

async def test_no_release_while_the_writer_is_open(store):
    await search(store, SearchRequest(query="deployment"))
    store.index.writer()  # what the indexer holds while it writes
    try:
        assert store.index.release_pages() == 0
    finally:
        store.index.close_writer()
    assert store.index.release_pages() > 0


def test_tokenizer_dropped_and_reloaded_with_the_same_counts():
    text = "Deploy the 数据库 migration, then run `pytest -x` on tests/test_api.py."
    n = tokens.count_tokens(text)
    assert tokens.loaded() and tokens.tokenizer_name() == "cl100k_base"
    loads = tokens.loads
    assert tokens.release() and not tokens.loaded()
    assert tokens.count_tokens(text) == n
    assert tokens.loads == loads + 1


def test_timer_fires_once_after_the_last_touch():
    fired = []
    r = IdleRelease(after_s=0.3)
    r.register(lambda: fired.append(time.monotonic()))
    t0 = time.monotonic()
    for _ in range(5):  # queries keep coming: no release yet
        r.touch()
        time.sleep(0.1)
    assert not fired
    deadline = time.monotonic() + 5
    while not fired and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(fired) == 1 and fired[0] - t0 >= 0.3 + 0.4
    time.sleep(0.5)
    assert len(fired) == 1 and r.runs == 1  # nothing re-arms it until the next query
    r.touch()
    deadline = time.monotonic() + 5
    while len(fired) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(fired) == 2
    r.cancel()


def test_a_failing_release_does_not_stop_the_others():
    done = []
    r = IdleRelease(after_s=60)
    r.register(lambda: 1 / 0)
    r.register(lambda: done.append(1))
    r.release_now()
    assert done == [1] and r.runs == 1
