"""A fleet member's own writes are indexed once, by the change feed alone (issue 14
follow-up, `memoryd.fleet.feed_indexer`), against a real PostgreSQL: the units a
machine's store writes, and its one-liners, each add one document to its index
(`index.feed.indexed` in status), as another machine's do; a forget on one machine
leaves both indexes; and a kill -9 between the store's commit and the feed's read
loses nothing: the restart indexes those units from the feed, each once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memoryd.models import Record
from memoryd.store import Store
from memoryd.store.sessions import forget_session, session_pk
from memoryd.store.summaries import save_one_liners
from memoryd.store.units import store_record
from tests.fleet.test_follow_index import (
    caught,
    indexed_ids,
    open_store,
    store_ids,
    until,
)

ROOT = Path(__file__).resolve().parents[2]


def put(texts: list[str], sid: str, machine: str):
    """A store write: `texts` as units of session `sid` (as ingest stores them)."""
    def run(c):
        pk = session_pk(c, "generic", sid, project="/p", machine=machine)
        return [store_record(c, pk, Record("user", t), f"{sid}-{i}", None, 0).unit_id
                for i, t in enumerate(texts)]
    return run


def feed_status(store: Store) -> dict:
    return store.read_sync(store.index.status)["feed"]


def both_caught(stores: list[Store], n: int) -> bool:
    return all(caught(s) and len(indexed_ids(s)) == n for s in stores)


@contextmanager
def two_machines(tmp_path: Path, pg_url: str) -> Iterator[tuple[Store, Store]]:
    """A laptop and a server on one namespace, both joined before the test writes: a
    build that reads units committed after its join applies them again from the feed
    (by design), which would count them twice."""
    a = open_store(tmp_path, pg_url, "laptop")
    b = open_store(tmp_path, pg_url, "server")
    try:
        until(lambda: caught(a) and caught(b), 30, "both joined")
        yield a, b
    finally:
        a.close_sync()
        b.close_sync()


def test_own_units_and_one_liners_are_indexed_once_as_another_machines_are(tmp_path,
                                                                            pg_url):
    with two_machines(tmp_path, pg_url) as (a, b):
        own = a.write_sync(put([f"laptop line {i} ibis" for i in range(30)], "s", "laptop"))
        other = b.write_sync(put([f"server line {i} crane" for i in range(20)], "t", "server"))
        until(lambda: both_caught([a, b], 50), 30, "both machines' units on both")
        assert indexed_ids(a) == indexed_ids(b) == set(own) | set(other) == store_ids(pg_url)
        fa, fb = feed_status(a), feed_status(b)
        # one document per unit on each machine: its own writes came back once, by the feed
        assert (fa["indexed"], fa["changes"]) == (50, 50)
        assert (fb["indexed"], fb["changes"]) == (50, 50)

        # a one-liner is a change of the unit: indexed again once, on both machines
        a.write_sync(lambda c: save_one_liners(
            c, [(u, f"one-liner {u} osprey", "extractive", "p1") for u in own[:5]]))
        until(lambda: feed_status(a)["indexed"] == 55 and feed_status(b)["indexed"] == 55
              and caught(a) and caught(b), 30, "the one-liners on both")
        assert feed_status(a)["changes"] == feed_status(b)["changes"] == 55
        assert len(indexed_ids(a)) == len(indexed_ids(b)) == 50
        assert set(a.read_sync(lambda c: a.index.status(c))["feed"]["cpu_s"]) == {
            "read", "rows", "index"}


def test_a_forget_on_one_machine_leaves_both_indexes(tmp_path, pg_url):
    with two_machines(tmp_path, pg_url) as (a, b):
        own = a.write_sync(put([f"keep {i} plover" for i in range(10)], "keep", "laptop"))
        gone = a.write_sync(put([f"forget {i} rail" for i in range(10)], "gone", "laptop"))
        until(lambda: both_caught([a, b], 20), 30, "both machines hold the 20 units")
        pk = a.read_sync(lambda c: c.execute(
            "SELECT session_pk FROM units WHERE id = ?", (gone[0],)).fetchone()[0])
        a.write_sync(lambda c: forget_session(c, pk))
        until(lambda: both_caught([a, b], 10), 30, "the forget on both machines")
        assert indexed_ids(a) == indexed_ids(b) == set(own) == store_ids(pg_url)
        assert feed_status(a)["indexed"] == feed_status(b)["indexed"] == 20  # none again


# The child: a fleet member's store that stops reading the feed (its writer held in the
# backfill gap, an hour from now), then writes units of its own, commits them to PostgreSQL,
# says so, and waits to be killed.
CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {root!r})
    from tests.fleet.test_follow_index import open_store, caught, until
    from tests.fleet.test_own_writes import feed_status, put
    from pathlib import Path
    store = open_store(Path({tmp!r}), {url!r}, "laptop")
    until(lambda: caught(store), 60, "joined")
    store.index.busy_gap_s = 3600.0
    store.index._indexer._applied_at = time.monotonic()  # the gap counts from now
    store.index.busy = lambda: True
    before = feed_status(store)["changes"]
    ids = store.write_sync(put([f"unread {{i}} avocet" for i in range(40)], "k", "laptop"))
    time.sleep(0.5)  # the NOTIFY arrives; the held writer does not read
    print(json.dumps({{"ids": ids, "read": feed_status(store)["changes"] - before,
                      "holding": store.index._indexer.holding}}), flush=True)
    time.sleep(3600)
""")


def test_a_kill_between_the_stores_commit_and_the_feeds_read_loses_nothing(tmp_path,
                                                                          pg_url):
    import json

    # a first life: some units indexed and their position stored, then a clean stop
    first = open_store(tmp_path, pg_url, "laptop")
    early = first.write_sync(put([f"early {i} heron" for i in range(10)], "e", "laptop"))
    until(lambda: caught(first) and len(indexed_ids(first)) == 10, 30, "the first units")
    first.close_sync()

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(
        root=str(ROOT), tmp=str(tmp_path), url=pg_url)], stdout=subprocess.PIPE,
        text=True, env=env, cwd=ROOT)
    try:
        line = child.stdout.readline()
        assert line, "the child said nothing"
        said = json.loads(line)
        assert said["read"] == 0 and said["holding"]  # committed, not read by the feed
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        child.stdout.close()
    unread = said["ids"]
    assert set(unread) <= store_ids(pg_url)

    store = open_store(tmp_path, pg_url, "laptop")
    try:
        assert store.index.state == "ready"  # resumed from its position: no rebuild
        until(lambda: caught(store) and len(indexed_ids(store)) == 50, 30,
              "the killed member's units after the restart")
        assert indexed_ids(store) == set(early) | set(unread) == store_ids(pg_url)
        st = feed_status(store)
        assert st["rebuilds"] == 0
        assert (st["indexed"], st["changes"]) == (40, 40)  # each once, from the feed
    finally:
        store.close_sync()
