"""A fleet member lets go of what following left once it rests, with no query (issue 14
follow-up of issue 11 item 3, `FeedIndexer._rest`): after building its index of a
namespace another machine filled, and again after following a later batch, its index
writer is closed and the idle release runs (armed by the end of writing, as the SQLite
writer arms it). A real daemon on a real socket, a real PostgreSQL; the other machine
writes through SQL into the shared tables."""

from __future__ import annotations

import psycopg
import pytest

from memoryd.fleet import feed_indexer
from memoryd.runtime.idle_release import RELEASE
from tests.fleet.daemons import fleet_daemons
from tests.fleet.test_follow_index import insert_units, open_store, session
from tests.helpers import short_dir, wait_for
from tests.index.test_rest_after_writing import quick_rest  # noqa: F401 (a fixture)


@pytest.fixture
def quick_feed_rest(quick_rest, monkeypatch):  # noqa: F811 (the fixture imported above)
    """As `quick_rest` (the release 0.5 s after the end of writing), the feed's writer
    let go 0.2 s after its last apply."""
    monkeypatch.setattr(feed_indexer, "WRITER_IDLE_S", 0.2)


def other_machine_writes(url: str, name: str, n: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        insert_units(conn, session(conn, name, "server"),
                     [f"{name} line {i} heron 鹭 {i}" for i in range(n)])


async def _rested(c, dm, runs: int, units: int):
    st = await c.status()
    if (st["caught_up"] and st["units"] == units and st["memory"]["idle_releases"] > runs
            and not st["memory"]["armed"] and not dm.store.index.has_writer()):
        return st
    return None


async def test_a_member_that_built_and_followed_is_released_at_rest_without_a_query(
        tmp_path, pg_url, quick_feed_rest):
    # the namespace exists with another machine's units before this member joins
    writer = open_store(tmp_path, pg_url, "server")
    writer.close_sync()
    other_machine_writes(pg_url, "before", 300)
    RELEASE.cancel()  # whatever the closed store armed: only the daemon's count below
    settles, runs = RELEASE.settles, RELEASE.runs
    root = tmp_path / "laptop" / "src"
    root.mkdir(parents=True)
    with short_dir() as d:
        async with fleet_daemons(tmp_path, {"laptop": root}, d, pg_url) as fleet:
            dm, c = fleet["laptop"]
            # built from the store, then idle: released with no query asked
            st = await wait_for(lambda: _rested(c, dm, runs, 300), 60)
            assert RELEASE.settles > settles
            assert st["index"]["feed"]["indexed"] >= 300
            runs, settles = st["memory"]["idle_releases"], RELEASE.settles

            # a later batch from the other machine: followed, then released again
            other_machine_writes(pg_url, "after", 200)
            st = await wait_for(lambda: _rested(c, dm, runs, 500), 60)
            assert RELEASE.settles > settles
            assert st["index"]["feed"]["indexed"] >= 500
            r = await c.search(query="heron")  # what was released comes back on demand
            assert r["total"] > 0
