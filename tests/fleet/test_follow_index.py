"""Every machine's index follows the shared store's change feed (issue 14 items 4 and 9),
against a real PostgreSQL: stores and daemons of two machines on one namespace, rows
committed out of id order by concurrent writers, forget travelling to the other
machine, a machine joining a namespace that already has units (`index: rebuilding`,
then caught up), and a restart that resumes from the position in the index's meta."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from pathlib import Path

import psycopg

from memoryd.api import SearchRequest
from memoryd.fleet import changefeed as cf
from memoryd.index import META
from memoryd.recall.retrieval import retrieve_sync
from memoryd.recall.search import search
from memoryd.daemon.store_index import open_store_sync
from memoryd.store import Store
from memoryd.store_target import StoreTarget
from tests.fleet.daemons import fleet_daemons, msg
from tests.helpers import (
    SLOWDOWN,
    caught_up,
    ctl,
    short_dir,
    wait_for,
    write_jsonl,
)

SCHEMA = "memoryd_team"


def target(url: str, machine: str) -> StoreTarget:
    return StoreTarget(url=url, namespace="team", machine=machine)


def open_store(tmp_path: Path, url: str, machine: str) -> Store:
    return open_store_sync(tmp_path / machine / "memoryd.db", target=target(url, machine))


def session(conn, name: str, machine: str = "writer") -> int:
    now = time.time()
    return conn.execute(
        f"INSERT INTO {SCHEMA}.sessions (agent, session_id, machine, created_at, updated_at)"
        " VALUES ('generic', %s, %s, %s, %s) RETURNING id", (name, machine, now, now)
    ).fetchone()[0]


def insert_units(conn, pk: int, texts: list[str], first_seq: int = 1) -> list[int]:
    rows = conn.execute(
        f"INSERT INTO {SCHEMA}.units (session_pk, record_id, seq, turn, role, kind, content,"
        " ts, chars, tokens) SELECT %s, 'r' || (%s + i), %s + i, 0, 'user', 'message', t,"
        " extract(epoch FROM now()), length(t), 1"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS x(t, i) RETURNING id",
        (pk, first_seq, first_seq, texts)).fetchall()
    return [r[0] for r in rows]


def indexed_ids(store: Store) -> set[int]:
    """The units searchable: committed (less those the live tail replaced) and in the
    tail."""
    import tantivy

    ix = store.index
    with ix.tail.lock:
        s = ix._index.searcher()
        res = s.search(tantivy.Query.all_query(), max(1, s.num_docs), count=False)
        done = {int(u) for u in s.fast_field_values("unit_id", [a for _, a in res.hits])}
        return (done - ix.tail.replaced) | set(ix.tail.docs)


def store_ids(url: str) -> set[int]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(f"SELECT id FROM {SCHEMA}.units")}


def until(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout * SLOWDOWN
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def caught(store: Store) -> bool:
    return store.read_sync(store.index.is_caught_up)


# -- two real daemons ----------------------------------------------------------------------


async def test_two_daemons_search_each_others_units_and_forget_travels(tmp_path, pg_url,
                                                                       memoryd_home, capsys):
    roots = {m: tmp_path / m / "src" for m in ("laptop", "server")}
    write_jsonl(roots["laptop"] / "a.jsonl", [msg(0, "the quokka migration on the laptop"),
                                             msg(1, "laptop reply")])
    write_jsonl(roots["server"] / "b.jsonl", [msg(0, "wombat build 记忆 on the server"),
                                             msg(1, "server reply")])
    with short_dir() as d:
        async with fleet_daemons(tmp_path, roots, d, pg_url) as started:
            c = {m: client for m, (_, client) in started.items()}
            dms = {m: dm for m, (dm, _) in started.items()}

            async def finds(m: str, q: str, n: int = 1):
                r = await c[m].search(query=q)
                return r if r["total"] == n else None

            # each machine's search finds the other's units, from its own index
            await wait_for(lambda: finds("laptop", "wombat"), timeout=30)
            await wait_for(lambda: finds("server", "quokka"), timeout=30)
            await wait_for(lambda: finds("laptop", "记忆"), timeout=30)
            # an append on one machine is searchable on the other
            write_jsonl(roots["server"] / "b.jsonl", [msg(2, "the kiwi appendix")])
            await wait_for(lambda: finds("laptop", "kiwi"), timeout=30)

            # the operator's view: both machines with their last ingest, the index lag
            st = await wait_for(lambda: caught_up(c["laptop"]), timeout=30)
            machines = {m["machine"]: m for m in st["store"]["machines"]}
            assert set(machines) == {"laptop", "server"}
            assert all(m["last_ingest"] and m["files"] == 1 for m in machines.values())
            assert st["index"]["lag"] == {"changes": 0, "seconds": 0.0}
            assert st["index"]["state"] == "ready" and st["index"]["feed"]["position"]
            # the backfill is over: the feed is no longer held behind this machine's ingest
            assert dms["laptop"].backfill_done and not dms["laptop"].store.index.busy()
            metrics = await c["laptop"].request("GET", "/metrics")
            assert 'memoryd_fleet_machine_last_ingest_timestamp_seconds{machine="server"}' \
                in metrics
            # (a one-liner written meanwhile is a change too: the figure, not its value)
            assert re.search(r"^memoryd_index_lag_changes \d", metrics, re.M)
            assert re.search(r"^memoryd_index_lag_seconds \d", metrics, re.M)
            # the row cache: the units it holds (all five) and its size on disk
            rc = st["index"]["row_cache"]
            assert rc["units"] == 5 and rc["bytes"] >= (
                dms["laptop"].store.index.rows.path.stat().st_size) > 0
            assert re.search(r"^memoryd_row_cache_units 5\.0$", metrics, re.M)
            assert re.search(r"^memoryd_row_cache_bytes [1-9]", metrics, re.M)
            code, out, _ = await ctl(capsys, d / "laptop.sock", "status")
            assert code == 0 and "machine  laptop: last ingest" in out
            assert "machine  server: last ingest" in out
            assert re.search(r"^index    ready; \d+ units.*; lag \d+ changes", out, re.M)
            assert re.search(r"; row cache 5 units, \d+\.\d MB", out)

            # forget on the server removes the session from the laptop's search
            await c["server"].forget("b")
            await wait_for(lambda: finds("laptop", "wombat", 0), timeout=30)
            await wait_for(lambda: finds("laptop", "kiwi", 0), timeout=30)
            assert (await c["laptop"].search(query="quokka"))["total"] == 1


# -- stores: concurrency, joining, restarting ----------------------------------------------


def test_concurrent_writers_on_two_machines_lose_no_row(tmp_path, pg_url):
    """Writers on two machines hold transactions open so rows commit out of id order,
    some rows are deleted and rewritten meanwhile; both followers end with exactly the
    store's units."""
    stores = [open_store(tmp_path, pg_url, m) for m in ("a", "b")]
    try:
        until(lambda: all(caught(s) for s in stores), 30, "empty indexes caught up")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            pks = [session(conn, f"s{i}") for i in range(6)]
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            rnd = random.Random(w)
            try:
                with psycopg.connect(pg_url) as conn:
                    for r in range(15):
                        ids = insert_units(conn, pks[w], [f"w{w} r{r} n{k} tapir"
                                                          for k in range(rnd.randint(1, 30))],
                                           first_seq=r * 100)
                        if r % 4 == 3:  # a forget and a rewrite in the same stream
                            conn.execute(f"DELETE FROM {SCHEMA}.units WHERE id = %s", (ids[0],))
                            conn.execute(f"UPDATE {SCHEMA}.units SET one_liner = 'okapi'"
                                         " WHERE id = %s", (ids[-1],))
                        time.sleep(rnd.random() * 0.05)  # held open: others commit first
                        conn.commit()
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        want = store_ids(pg_url)
        assert len(want) > 100
        for s in stores:
            until(lambda s=s: caught(s), 60, "the follower caught up")
            assert indexed_ids(s) == want
        # the rewrites are searchable on both machines
        with psycopg.connect(pg_url) as conn:
            okapi = conn.execute(f"SELECT count(*) FROM {SCHEMA}.units WHERE one_liner = 'okapi'"
                                 ).fetchone()[0]
        for s in stores:
            r = s.read_sync(lambda c, s=s: retrieve_sync(c, s.index, "okapi", k=50,
                                                         count=True))
            assert r.total == okapi
    finally:
        for s in stores:
            s.close_sync()


async def test_joining_an_existing_namespace_rebuilds_in_the_background(tmp_path, pg_url):
    first = open_store(tmp_path, pg_url, "first")
    first.close_sync()  # the schema exists; fill it as other machines would have
    with psycopg.connect(pg_url) as conn:
        pk = session(conn, "big")
        for b in range(6):
            insert_units(conn, pk, [f"unit {b}-{i} capybara" for i in range(4000)],
                         first_seq=b * 10_000)
        insert_units(conn, pk, ["the one narwhal"], first_seq=99_999)
        conn.commit()
    store = open_store(tmp_path, pg_url, "newcomer")
    try:
        st = await store.read(store.index.status)
        assert st["state"] == "rebuilding" and not st["caught_up"]
        r = await search(store, SearchRequest(query="narwhal"))
        assert "index: rebuilding" in r.message  # answered by the fallback scan meanwhile
        assert r.total == 1
        # a unit written while it builds is in the feed after its position
        with psycopg.connect(pg_url) as conn:
            insert_units(conn, pk, ["a late ocelot"], first_seq=200_000)
            conn.commit()
        await store.indexed(timeout=120 * SLOWDOWN)
        st = await store.read(store.index.status)
        assert st["state"] == "ready" and st["caught_up"] and st["units"] == 24_002
        r = await search(store, SearchRequest(query="ocelot"))
        assert r.total == 1 and "rebuilding" not in r.message
        assert indexed_ids(store) == store_ids(pg_url)
        with psycopg.connect(pg_url) as conn:
            seen = {r[0] for r in conn.execute(f"SELECT machine FROM {SCHEMA}.change_positions")}
        assert "newcomer" in seen
    finally:
        store.close_sync()


def test_restart_resumes_from_the_stored_position(tmp_path, pg_url):
    store = open_store(tmp_path, pg_url, "laptop")
    with psycopg.connect(pg_url) as conn:
        pk = session(conn, "s")
        insert_units(conn, pk, [f"first {i} heron" for i in range(50)])
        conn.commit()
    until(lambda: caught(store) and len(indexed_ids(store)) == 50, 30, "first units")
    store.close_sync()  # the live tail is committed at the close, with its position
    meta = json.loads((tmp_path / "laptop" / "index" / META).read_text())
    saved = cf.Position.from_json(meta["feed"])
    assert meta["complete"]

    # another machine writes and deletes while this one is down
    with psycopg.connect(pg_url) as conn:
        ids = insert_units(conn, pk, [f"second {i} egret" for i in range(20)], first_seq=100)
        conn.execute(f"DELETE FROM {SCHEMA}.units WHERE content = 'first 0 heron'")
        conn.commit()
    store = open_store(tmp_path, pg_url, "laptop")
    try:
        assert store.index.state == "ready"  # searchable at once: no rebuild
        until(lambda: caught(store), 30, "the restarted follower caught up")
        got = indexed_ids(store)
        assert got == store_ids(pg_url) and set(ids) <= got and len(got) == 69
        ixr = store.index._indexer
        assert ixr.rebuilds == 0 and ixr.applies <= 2  # the 21 changes, not 69 units again
    finally:
        store.close_sync()
    meta = json.loads((tmp_path / "laptop" / "index" / META).read_text())
    assert cf.Position.from_json(meta["feed"]).done != saved.done


def test_a_machine_pruned_past_rebuilds(tmp_path, pg_url):
    """A machine away longer than the prune keeps is forgotten; back, it rebuilds."""
    store = open_store(tmp_path, pg_url, "away")
    with psycopg.connect(pg_url) as conn:
        pk = session(conn, "s")
        insert_units(conn, pk, ["before the trip"])
        conn.commit()
    until(lambda: caught(store), 30, "caught up")
    store.close_sync()
    with psycopg.connect(pg_url) as conn:
        insert_units(conn, pk, ["while away lemur"], first_seq=10)
        conn.commit()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"UPDATE {SCHEMA}.change_positions"
                     " SET updated_at = now() - interval '30 days'")
        assert cf.prune(conn, SCHEMA) >= 2
    store = open_store(tmp_path, pg_url, "away")
    try:
        until(lambda: caught(store), 60, "rebuilt and caught up")
        assert store.index._indexer.rebuilds == 1
        assert indexed_ids(store) == store_ids(pg_url)
        store.index.prune_changes()  # the hourly job runs cleanly
    finally:
        store.close_sync()


def test_changes_gather_into_few_commits_while_the_machine_backfills(tmp_path, pg_url):
    """While this machine backfills its own transcripts (`busy`), the feed is applied in
    spaced, large batches: 21 transactions (21 NOTIFYs) become one apply when a
    caller waits for the index, 5 more one apply when the backfill ends; nothing lost.
    An edited unit already in the index is replaced, not doubled (only units above the
    index's largest id skip the delete)."""
    store = open_store(tmp_path, pg_url, "laptop")
    busy = threading.Event()
    try:
        with psycopg.connect(pg_url) as conn:
            pk = session(conn, "s")
            first = insert_units(conn, pk, ["an old tern"])
            conn.commit()
        until(lambda: caught(store) and indexed_ids(store) == set(first), 30, "first unit")
        ix, ixr = store.index, store.index._indexer
        ix.busy_gap_s = 600.0  # longer than the test: only the end of `busy` applies
        ix.busy = busy.is_set
        busy.set()
        ix.notify_write()  # a pass now finds `busy` and holds: nothing is read from here on
        until(lambda: ixr.holding, 30, "the feed held behind the backfill")
        commits = ixr.applies
        ids = []
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for i in range(20):
                ids += insert_units(conn, pk, [f"gathered {i} avocet"], first_seq=10 + i)
            conn.execute(f"UPDATE {SCHEMA}.units SET content = 'a new plover' WHERE id = %s",
                         (first[0],))
        assert ixr.applies == commits  # held: nothing applied while busy
        with ix.waited():  # someone waits for it to be searchable (Store.indexed)
            ix.notify_write()
            until(lambda: caught(store), 30, "applied for a caller that waits")
        assert indexed_ids(store) == set(first + ids) == store_ids(pg_url)
        assert ixr.applies - commits == 1
        ix.notify_write()
        until(lambda: ixr.holding, 30, "held again once nobody waits")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for i in range(5):
                ids += insert_units(conn, pk, [f"later {i} stilt"], first_seq=50 + i)
        assert ixr.applies - commits == 1  # held again
        busy.clear()
        until(lambda: caught(store), 30, "applied once the backfill ended")
        assert indexed_ids(store) == set(first + ids) == store_ids(pg_url)
        assert ixr.applies - commits == 2
        assert ix.docs() == 26  # the edited unit replaced, not doubled
        found = store.read_sync(lambda c: retrieve_sync(c, ix, "plover", k=5, count=True))
        assert found.total == 1
        gone = store.read_sync(lambda c: retrieve_sync(c, ix, "tern", k=5, count=True))
        assert gone.total == 0
        assert store.read_sync(ix.status)["feed"]["held_s"] > 0
    finally:
        store.close_sync()


def test_a_follower_finds_another_machines_unit_before_any_commit(tmp_path, pg_url,
                                                                  monkeypatch):
    """The fleet's live tail: a unit committed to PostgreSQL by another machine is found
    by this machine's search from its tail, with no tantivy commit since (commits held by
    the tail's policy); a delete of it travels the same way; a close commits the tail."""
    monkeypatch.setenv("MEMORYD_INDEX__TAIL_COMMIT_S", "3600")
    monkeypatch.setenv("MEMORYD_INDEX__TAIL_COMMIT_DOCS", "1000000")
    store = open_store(tmp_path, pg_url, "b")
    try:
        with psycopg.connect(pg_url) as conn:
            pk = session(conn, "s", machine="a")
            insert_units(conn, pk, ["an old gull"])
            conn.commit()
        until(lambda: caught(store) and len(indexed_ids(store)) == 1, 30, "first unit")
        ixr = store.index._indexer
        commits = ixr.commits

        def finds(q: str) -> int:
            return store.read_sync(lambda c: retrieve_sync(c, store.index, q, k=5,
                                                           count=True)).total

        with psycopg.connect(pg_url) as conn:
            [uid] = insert_units(conn, pk, ["a live puffin from machine a"], first_seq=5)
            conn.commit()
        until(lambda: finds("puffin") == 1, 30, "the unit found on b")
        assert ixr.commits == commits and uid in store.index.tail.docs
        with psycopg.connect(pg_url) as conn:
            conn.execute(f"DELETE FROM {SCHEMA}.units WHERE id = %s", (uid,))
            conn.commit()
        until(lambda: finds("puffin") == 0, 30, "the delete applied on b")
        assert ixr.commits == commits and finds("gull") == 1
    finally:
        store.close_sync()
    assert ixr.commits == commits + 1  # the close committed the tail


def test_the_feed_holds_behind_a_backfill_right_after_building_the_index(tmp_path, pg_url):
    """A machine joining a namespace builds its index from the store, not from the feed:
    the hold behind its own backfill counts from the build's last commit too (it counted
    from no apply at all, and never held)."""
    open_store(tmp_path, pg_url, "seed").close_sync()  # the namespace's schema
    with psycopg.connect(pg_url) as conn:
        pk = session(conn, "s")
        first = insert_units(conn, pk, ["an old tern"])
        conn.commit()
    store = open_store(tmp_path, pg_url, "laptop")
    try:
        until(lambda: caught(store) and indexed_ids(store) == set(first), 30, "the build")
        ix, ixr = store.index, store.index._indexer
        assert ixr.applies == 0  # built, not applied
        busy = threading.Event()
        ix.busy_gap_s = 600.0
        ix.busy = busy.is_set
        busy.set()
        ix.notify_write()
        until(lambda: ixr.holding, 30, "the feed held behind the backfill")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            later = insert_units(conn, pk, ["a later avocet"], first_seq=10)
        assert ixr.applies == 0  # held
        busy.clear()
        until(lambda: caught(store) and indexed_ids(store) == set(first + later), 30,
              "applied once the backfill ended")
        assert ixr.applies == 1
    finally:
        store.close_sync()
