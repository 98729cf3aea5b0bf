"""The timeline's figures (issue 30) come from per-quarter-hour counts (unit_quarters),
no longer from a pass over every unit of the week: on a store of several sessions
across days, and after forget and retention, the page's days, sessions, spans and
message counts are exactly those of the old pass (kept here, as it was, as the oracle)."""

from __future__ import annotations

import os
import time
from datetime import date, datetime, timedelta

import pytest

from memoryd.models import Record
from memoryd.daemon.store_index import open_store
from memoryd.store import archive, sessions, units
from memoryd.store_target import StoreTarget
from memoryd.web import timeline

DAYS = timeline.DAYS


def old_counts(c, agent: str | None, project: str | None, until: date | None) -> list:
    """The timeline as the old pass made it: (day, [(session id, start, end, n)]) by
    the newest first, counted from units by the units_ts index with local-day bounds;
    and the days the older and newer links go to."""
    where, args = timeline._filters(agent, project)
    if until is None:
        until = timeline._day(c.execute(f"SELECT max(s.last_ts) FROM sessions s WHERE 1 = 1{where}",
                                        args).fetchone()[0]) or date.today()
    first = until - timedelta(days=DAYS - 1)
    lo, hi = timeline._midnight(first), timeline._midnight(until + timedelta(days=1))
    names = {r[0]: r[1] for r in c.execute(
        "SELECT s.id, s.session_id FROM sessions s WHERE coalesce(s.last_ts, 0) >= ? "
        f"AND coalesce(s.first_ts, 0) < ?{where}", [lo, hi, *args])}
    bounds = [timeline._midnight(first + timedelta(days=i)) for i in range(1, DAYS)]
    case = ("CASE " + " ".join(f"WHEN u.ts < ? THEN {i}" for i in range(DAYS - 1))
            + f" ELSE {DAYS - 1} END")
    by_ts = "" if getattr(c, "engine", "sqlite") == "postgresql" else " INDEXED BY units_ts"
    days: dict[int, list] = {}
    for r in c.execute(
            f"SELECT u.session_pk AS pk, {case} AS d, min(u.ts), max(u.ts), count(*) "
            f"FROM units u{by_ts} WHERE u.ts >= ? AND u.ts < ? "
            "GROUP BY u.session_pk, d", [*bounds, lo, hi]):
        if r[0] in names:
            days.setdefault(r[1], []).append((names[r[0]], r[2], r[3], r[4]))
    # where the pages before and after start, as SQLite's two-argument min and max said
    spans = [(r[0] or 0, r[1] or 0) for r in c.execute(
        f"SELECT s.first_ts, s.last_ts FROM sessions s WHERE 1 = 1{where}", args)]
    older = max((min(end, lo - 1) for start, end in spans if start < lo), default=None)
    newer = min((max(start, hi) for start, end in spans if end >= hi), default=None)
    return [[(first + timedelta(days=d), sorted(v, key=lambda x: -x[2]))
             for d, v in sorted(days.items(), reverse=True)],
            timeline._day(older) if older else None,
            timeline._day(newer) + timedelta(days=DAYS - 1) if newer else None]


def new_counts(c, agent: str | None, project: str | None, until: date | None) -> list:
    page = timeline.load(c, agent, project, until)
    return [[(day, [(r["session_id"], r["start"], r["end"], r["n"]) for r in rows])
             for day, rows in page["days"]], page["older"], page["newer"]]


def fill(c, agent: str, sid: str, project: str, start: datetime, n: int, step_min: float
         ) -> int:
    pk = sessions.session_pk(c, agent, sid, project=project)
    w = units.SessionWriter(c, pk)
    t0 = start.timestamp()
    for i in range(n):
        ts = None if i == 3 else t0 + i * step_min * 60  # one line without a time
        w.add(Record(role="user" if i % 2 == 0 else "assistant", content=f"{sid} {i}",
                     ts=ts), f"{sid}-{i}", None, None)
    w.flush()
    return pk


@pytest.fixture(params=["UTC", "America/New_York", "Asia/Kolkata"])
def zone(request):
    """The process's local zone for the test (the page's days are local days)."""
    was = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    yield request.param
    if was is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = was
    time.tzset()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request) -> StoreTarget:
    """The store the page reads: SQLite, or a fleet's PostgreSQL namespace."""
    if request.param == "sqlite":
        return StoreTarget()
    return StoreTarget(url=request.getfixturevalue("pg_url"), machine="m1")


async def test_issue_30_timeline_counts_same_as_a_pass_over_units(tmp_path, zone, target):
    store = await open_store(tmp_path / "memoryd.db", target=target)
    try:
        def seed(c) -> dict[str, int]:
            return {
                # across midnights, over ten days, in two agents and three projects
                "long": fill(c, "claude-code", "long", "/p/a", datetime(2026, 3, 2, 21, 50),
                             700, 19.0),
                "night": fill(c, "codex", "night", "/p/b", datetime(2026, 3, 8, 23, 40),
                              90, 1.5),
                "day": fill(c, "claude-code", "day", "/p/b", datetime(2026, 3, 9, 9, 0),
                            60, 4.0),
                "old": fill(c, "codex", "old", "/p/c", datetime(2026, 2, 20, 12, 0), 30, 30.0),
            }
        pks = await store.write(seed)

        async def same() -> None:
            cases = [(None, None, None), ("codex", None, None), (None, "/p/b", None),
                     (None, None, date(2026, 3, 5)), (None, None, date(2026, 2, 24)),
                     ("claude-code", "/p/a", date(2026, 3, 12))]
            for a, p, u in cases:
                want = await store.read(lambda c: old_counts(c, a, p, u))  # noqa: B023
                assert await store.read(lambda c: new_counts(c, a, p, u)) == want  # noqa: B023
            assert (await store.read(lambda c: new_counts(c, None, None, None)))[0][0][1]

        await same()
        # forget by query: units one by one, among them a day's first and last
        ids = await store.read(lambda c: [r[0] for r in c.execute(
            "SELECT id FROM units WHERE session_pk = ? AND seq % 7 IN (0, 1) "
            "ORDER BY seq", (pks["long"],))])
        await store.write(lambda c: sessions.forget_units(c, ids))
        await same()
        # retention: archived out of the store, then restored
        rows = await store.read(lambda c: archive.session_units(c, pks["night"]))
        await store.write(lambda c: archive.mark_archived(c, pks["night"], "2026-03"))
        await same()
        await store.write(lambda c: archive.restore_units(c, pks["night"], rows))
        await same()
        await store.write(lambda c: sessions.forget_session(c, pks["day"]))
        await same()
    finally:
        await store.close()
