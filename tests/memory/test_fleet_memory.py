"""Fleet mode's memory folder: two real daemons (two homes, two machines) on one
PostgreSQL namespace, real JSONL, real files. MEMORY.md, the daily notes and HISTORY.md
are one per namespace: a consolidation on A reaches B's files, a user's edit on B reaches
the store and A's file, edits on both sides merge; two machines consolidating the same
day at once write each entry once; a dead claimer's firing is redone; path commands
touch only this machine's files."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from pathlib import Path
from typing import Any

import psycopg

from memoryd.consolidate.clock import SettableClock
from memoryd.daemon import Daemon
from memoryd.memory.merge import merge3
from memoryd.paths import resolve_paths
from memoryd.store import memory_docs
from tests.helpers import AsyncClient, short_dir, wait_for, write_jsonl
from tests.consolidate.test_consolidate import DAY1, DAY2, msgs, settings

DAY = "2026-10-05"
S2 = [("user", "Again: commit messages in Conventional Commits format, I told you."),
      ("user", "We decided to keep the cover images in Redis for a day.")]


@contextlib.asynccontextmanager
async def fleet(tmp_path: Path, pg_url: str, clock: SettableClock, srcs: dict[str, Path],
                files: dict[Path, list[dict]]):
    """A daemon per machine name, each with its own home and socket, one namespace; the
    transcripts are written once all are up (a daemon starting installs the change feed's
    triggers, which a concurrent ingest can deadlock against: left to the fleet room)."""
    out: dict[str, tuple[Daemon, AsyncClient, Path]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for name, src in srcs.items():
            sock = stack.enter_context(short_dir()) / "m.sock"
            home = tmp_path / name
            s = settings(src, sock, store={"url": pg_url, "machine": name,
                                           "namespace": "team"})
            d = Daemon(s, resolve_paths(home), environ={}, clock=clock)
            await d.start()
            stack.push_async_callback(d.stop)
            out[name] = (d, AsyncClient(sock), home / "data" / "memory")
        for path, recs in files.items():
            write_jsonl(path, recs)
        yield out


def read(mdir: Path, name: str = "MEMORY.md") -> str:
    p = mdir / name
    return p.read_text() if p.exists() else ""


async def has(mdir: Path, text: str, name: str = "MEMORY.md", timeout: float = 30) -> str:
    return await wait_for(lambda: t if text in (t := read(mdir, name)) else None,
                          timeout=timeout, interval=0.2)


async def units(c: AsyncClient, n: int) -> None:
    async def ok() -> bool:
        st = await c.status()
        return st["caught_up"] and st["units"] >= n
    await wait_for(ok, timeout=30)


def test_merge3_ours_wins_and_both_sides_land_once():
    base = "# d\n\n## Topics\n- a\n\n## Decisions\n- x\n"
    ours = "# d\n\n## Topics\n- a\n- mine\n\n## Decisions\n- x\n\n## Open Questions\n- q\n"
    theirs = "# d\n\n## Topics\n- a\n- theirs\n\n## Decisions\n- x\n- y\n"
    assert merge3(base, ours, theirs) == ("# d\n\n## Topics\n- a\n- theirs\n- mine\n\n"
                                          "## Decisions\n- x\n- y\n\n## Open Questions\n- q\n")
    assert merge3("A\nB\nC\n", "A\nB2\nC\n", "A\nB\nC\nD\n") == "A\nB2\nC\nD\n"
    assert merge3("A\nB\n", "A\n", "A\nB\nC\n") == "A\nC\n"  # removed here: gone there too
    assert merge3("", "A\nX\n", "B\nX\n") == "B\nX\nA\n" or "X" in merge3("", "A\nX\n",
                                                                          "B\nX\n")
    assert merge3(None, "A\n", "A\n") == "A\n" and merge3("A\n", None, "A\n") is None


async def test_one_memory_folder_for_the_namespace(tmp_path, pg_url):
    srcs = {"laptop": tmp_path / "la", "server": tmp_path / "sv"}
    for p in srcs.values():
        p.mkdir()
    files = {srcs["laptop"] / "shelfie" / "s1.jsonl": msgs("s1", DAY, DAY1)}
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    async with fleet(tmp_path, pg_url, clock, srcs, files) as f:
        (a, ca, ma), (b, _, mb) = f["laptop"], f["server"]
        await units(ca, len(DAY1))
        await ca.run_job("consolidate", {"date": DAY})
        assert "Conventional Commits" in read(ma)
        # consolidated on A: B's MEMORY.md and daily note catch up
        mem_b = await has(mb, "Conventional Commits")
        assert mem_b == read(ma)
        note_b = await has(mb, "ISBN", f"{DAY}.md")
        assert note_b == read(ma, f"{DAY}.md")

        # the user edits MEMORY.md on B: the store and A's file follow
        (mb / "MEMORY.md").write_text(mem_b + "2026-10-06|me|I review every PR on GitHub\n")
        await has(ma, "I review every PR on GitHub")
        with psycopg.connect(pg_url) as conn:
            body = conn.execute("SELECT body FROM memoryd_team.memory_docs "
                                "WHERE name = 'MEMORY.md'").fetchone()[0]
        assert "I review every PR on GitHub" in body

        # edits on both machines before either syncs: both land, the deletion holds
        async with a.fleet_memory._lock, b.fleet_memory._lock:
            (ma / "MEMORY.md").write_text(read(ma) + "2026-10-07|me|ship on Thursdays\n")
            (mb / "MEMORY.md").write_text(read(mb).replace(
                "2026-10-06|me|I review every PR on GitHub\n", ""))
        await has(mb, "ship on Thursdays")
        await wait_for(lambda: "every PR" not in read(ma) and read(ma) == read(mb),
                       timeout=30, interval=0.2)
        assert read(ma).count("ship on Thursdays") == 1

        # forget on A: the items only that session stood behind leave B's files too
        await ca.forget("shelfie/s1")
        await wait_for(lambda: "Conventional" not in read(mb)
                       and "ISBN" not in read(mb, f"{DAY}.md"), timeout=30, interval=0.2)
        assert "ship on Thursdays" in read(mb)


async def test_two_machines_consolidating_one_day_write_each_entry_once(tmp_path, pg_url):
    srcs = {"laptop": tmp_path / "la", "server": tmp_path / "sv"}
    for p in srcs.values():
        p.mkdir()
    files = {srcs["laptop"] / "shelfie" / "s1.jsonl": msgs("s1", DAY, DAY1),
             srcs["server"] / "shelfie" / "s2.jsonl": msgs("s2", DAY, S2, hour=9)}
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    async with fleet(tmp_path, pg_url, clock, srcs, files) as f:
        (a, ca, ma), (b, cb, mb) = f["laptop"], f["server"]
        await units(ca, len(DAY1) + len(S2))
        await units(cb, len(DAY1) + len(S2))
        await asyncio.gather(ca.run_job("consolidate", {"date": DAY}),
                             cb.run_job("consolidate", {"date": DAY}))

        async def settled() -> bool:
            return (read(ma) == read(mb) and "Conventional" in read(ma)
                    and read(ma, f"{DAY}.md") == read(mb, f"{DAY}.md")
                    and not (await a.fleet_memory.sync())["pushed"]
                    and not (await b.fleet_memory.sync())["pushed"])
        await wait_for(settled, timeout=40, interval=0.3)
        lines = [ln for ln in read(ma).splitlines() if ln.strip()]
        assert len(lines) == len(set(lines)) and read(ma).count("Conventional Commits") == 1
        items = [ln for ln in read(ma, f"{DAY}.md").splitlines() if ln.startswith("- ")]
        assert len(items) == len(set(items)) and any("Redis" in x for x in items)

        # the scheduled firing: both machines fire at once, one claims and runs it
        await asyncio.gather(a.consolidator.scheduled("day"), b.consolidator.scheduled("day"))
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute("SELECT machine, done_at FROM memoryd_team.fleet_once "
                                "WHERE key LIKE 'day:%'").fetchall()
        assert len(rows) == 1 and rows[0][1] is not None


async def test_a_dead_claimers_firing_is_taken_over(tmp_path, pg_url):
    srcs = {"laptop": tmp_path / "la"}
    srcs["laptop"].mkdir()
    files = {srcs["laptop"] / "shelfie" / "s1.jsonl": msgs("s1", DAY, DAY1)}
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    async with fleet(tmp_path, pg_url, clock, srcs, files) as f:
        a, ca, ma = f["laptop"]
        await units(ca, len(DAY1))
        now = time.time()
        # what a claimer killed mid-run leaves: a claim, unfinished, its lease run out;
        # and a live claimer's firing, still leased
        await a.store.write(lambda c: memory_docs.claim(
            c, "consolidate", f"day:{DAY}", "ghost", clock(), now - 300, 60))
        # leases are in the database's time (issue 28 item 7c): the ghost's ran out there
        await a.store.write(lambda c: c.execute(
            "UPDATE fleet_once SET lease_until = lease_until - 3600 WHERE machine = 'ghost'"))
        await a.store.write(lambda c: memory_docs.claim(
            c, "consolidate", f"nightly:{DAY}", "alive", clock(), now, 600))
        assert not await a.consolidator.firings.claim(f"nightly:{DAY}")  # leased: theirs
        assert await a.consolidator.firings.take_over() == [f"day:{DAY}"]
        assert "Conventional Commits" in read(ma) and "ISBN" in read(ma, f"{DAY}.md")
        with psycopg.connect(pg_url) as conn:
            rows = dict(conn.execute("SELECT key, machine FROM memoryd_team.fleet_once "
                                     "WHERE done_at IS NOT NULL").fetchall())
        assert rows == {f"day:{DAY}": "laptop"}  # the live one is left to its claimer
        assert await a.consolidator.firings.take_over() == []


async def test_path_commands_touch_only_this_machines_files(tmp_path, pg_url):
    shared = tmp_path / "same"  # the same path on both machines: two files, two sessions
    shared.mkdir()
    files = {shared / "proj" / "chat.jsonl": msgs("c", DAY, DAY2)}
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    async with fleet(tmp_path, pg_url, clock, {"laptop": shared, "server": shared},
                     files) as f:
        (_, ca, _), (_, cb, _) = f["laptop"], f["server"]
        await units(ca, 2 * len(DAY2))
        await units(cb, 2 * len(DAY2))
        st: dict[str, Any] = await ca.status()
        assert st["files"] == 1  # its own file, not the other machine's
        r = await ca.request("POST", "/v1/exclusions", {"value": str(shared / "proj"),
                                                        "purge": True})
        assert r["sessions_stored"] == 1 and r["purged"]["sessions"] == 1
        assert (await cb.request("GET", "/v1/exclusions"))["exclusions"] == []
        with psycopg.connect(pg_url) as conn:
            left = conn.execute("SELECT machine, count(*) FROM memoryd_team.sessions "
                                "GROUP BY machine").fetchall()
        assert left == [("server", 1)]
