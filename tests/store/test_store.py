import threading

import pytest

from memoryd.index import Filters
from memoryd.models import Record
from memoryd.store.migrations import MIGRATIONS
from memoryd.store.sessions import list_sessions, session_pk
from memoryd.store.units import store_record


def tables(c, engine):
    if engine == "sqlite":
        return {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    return {r[0] for r in c.execute("SELECT table_name FROM information_schema.tables "
                                    "WHERE table_schema = current_schema()")}


async def test_migrate_blank_creates_schema(store, engine):
    def schema(c):
        mode = c.execute("PRAGMA journal_mode").fetchone()[0] if engine == "sqlite" else None
        done = [r[0] for r in c.execute("SELECT name FROM _migrations ORDER BY name")]
        return tables(c, engine), mode, done

    names, mode, done = await store.read(schema)
    assert {"sessions", "units", "files", "index_pending", "_migrations"} <= names
    assert "units_fts" not in names  # search lives in the tantivy index
    assert mode == ("wal" if engine == "sqlite" else None)
    assert done == [m.__name__ for m in MIGRATIONS]
    assert store.kind == engine


async def test_reopen_does_not_migrate_twice(open_store):
    s = await open_store("m")
    await s.close()
    s = await open_store("m")
    n = await s.read(lambda c: c.execute("SELECT count(*) FROM _migrations").fetchone()[0])
    await s.close()
    assert n == len(MIGRATIONS)


async def test_sql_runs_off_the_event_loop_thread(store):
    loop_thread = threading.get_ident()
    ran_on = await store.read(lambda c: threading.get_ident())
    assert ran_on != loop_thread


async def test_write_error_rolls_back(store):
    def bad(c):
        session_pk(c, "generic", "s1")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await store.write(bad)
    assert await store.read(lambda c: list_sessions(c)) == []


def _put(c, recs):
    pk = session_pk(c, "claude-code", "s1", project="/p")
    return [store_record(c, pk, r, r.record_id, None, 0) for r in recs]


async def test_merge_semantics(store):
    recs = [
        Record("user", "hello", record_id="u1"),
        Record("assistant", "part one", record_id="m1", merge="append", part_id="a"),
        Record("assistant", "part two", record_id="m1", merge="append", part_id="b"),
        Record("assistant", "part one", record_id="m1", merge="append", part_id="a"),  # replay
        Record("user", "hello again", record_id="u1"),  # replay with other text: ignored
        Record("assistant", "v1", record_id="g1", merge="replace"),
        Record("assistant", "v2 final", record_id="g1", merge="replace"),
    ]
    out = await store.write(lambda c: _put(c, recs))
    assert [o is not None and o.new for o in out] == [True, True, False, False, False, True,
                                                       False]
    rows = await store.read(lambda c: [dict(r) for r in c.execute(
        "SELECT record_id, content, seq, turn FROM units ORDER BY seq")])
    assert rows == [
        {"record_id": "u1", "content": "hello", "seq": 1, "turn": 1},
        {"record_id": "m1", "content": "part one\n\npart two", "seq": 2, "turn": 1},
        {"record_id": "g1", "content": "v2 final", "seq": 3, "turn": 1},
    ]
    await store.indexed()
    g1 = await store.read(lambda c: c.execute(
        "SELECT id FROM units WHERE record_id = 'g1'").fetchone()[0])
    assert await search(store, "final") == (1, [g1])
    assert await search(store, "v1") == (0, [])  # the replaced text left the index
    sess = await store.read(lambda c: list_sessions(c))
    assert sess[0]["units"] == 3 and sess[0]["user_units"] == 1


async def search(store, term, **filters):
    """(matches, unit ids) of one term in the search index."""
    total, found = await store.read(lambda c: store.index.candidates(
        c, [term], Filters(**filters), mode="or", limit=5, count=True))
    return total, [u for u, _ in found]


async def test_search_filters(store):
    def put(c):
        for agent, sid in (("codex", "a"), ("pi", "b")):
            pk = session_pk(c, agent, sid, project=f"/proj/{sid}")
            store_record(c, pk, Record("user", "deploy the service"), f"{sid}1", None, 0)

    await store.write(put)
    await store.indexed()
    assert (await search(store, "deploy"))[0] == 2
    total, ids = await search(store, "deploy", agent="pi")
    sid = await store.read(lambda c: c.execute(
        "SELECT s.session_id FROM units u JOIN sessions s ON s.id = u.session_pk "
        "WHERE u.id = ?", (ids[0],)).fetchone()[0])
    assert total == 1 and sid == "b"
    assert (await search(store, "deploy", project="/proj/a"))[0] == 1


async def test_session_gets_a_fallback_title_from_its_first_user_message(store):
    def put(c):
        pk = session_pk(c, "codex", "s9")
        store_record(c, pk, Record("assistant", "hello"), "a", None, 0)
        store_record(c, pk, Record("user", "\n  Fix the flaky login test please\nmore"), "b",
                     None, 0)
        store_record(c, pk, Record("user", "second message"), "c", None, 0)
        pk2 = session_pk(c, "codex", "s10", title="Given title")
        store_record(c, pk2, Record("user", "x" * 200), "d", None, 0)

    await store.write(put)
    titles = {s["session_id"]: s["title"] for s in await store.read(lambda c: list_sessions(c))}
    assert titles == {"s9": "Fix the flaky login test please", "s10": "Given title"}
