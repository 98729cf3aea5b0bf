"""History consolidated by itself from the first start (issue 27, item 4), ranges on
request, and what status says about consolidation (item 6): a real daemon, real JSONL
in a watched dir, real SQLite, the API over the Unix socket, a settable clock."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memoryd.client import ApiError
from memoryd.config import load_settings
from memoryd.consolidate.clock import SettableClock
from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths
from tests.helpers import AsyncClient, ctl, wait_for, write_jsonl

TZ = "Asia/Shanghai"
RULES = ["Remember that the billing service deploys from the release branch only.",
         "我们约定：日志统一用 JSON 格式输出，字段名用 snake_case。",
         "Remember that I want answers in British English spelling.",
         "Always run the migrations with --dry-run first on staging.",
         "以后提交信息都用中文写，先写模块名。"]


def day_msgs(sid: str, day: str, rule: str, hour: int = 2) -> list[dict]:
    t0 = dt.datetime.fromisoformat(f"{day}T{hour:02d}:00:00+00:00")
    turns = [("user", f"Morning. Let's look at the report for {day}."),
             ("assistant", "Sure, opening it now."),
             ("user", rule),
             ("assistant", "Noted."),
             ("user", "thanks")]
    return [{"role": role, "content": text, "id": f"{sid}-{i:03d}",
             "timestamp": (t0 + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for i, (role, text) in enumerate(turns)]


def small_talk(sid: str, day: str) -> list[dict]:
    t0 = dt.datetime.fromisoformat(f"{day}T03:00:00+00:00")
    turns = [("user", "Is it going to rain tonight?"), ("assistant", "I can't check weather."),
             ("user", "ok thanks"), ("user", "What's the capital of Peru?")]
    return [{"role": role, "content": text, "id": f"{sid}-{i:03d}",
             "timestamp": (t0 + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for i, (role, text) in enumerate(turns)]


def history_files(src: Path, start: dt.date, days: int, step: int = 1) -> tuple[list[str], int]:
    out, units = [], 0
    for i in range(0, days, step):
        d = (start + dt.timedelta(days=i)).isoformat()
        rows = day_msgs(f"h{i}", d, RULES[i % len(RULES)])
        write_jsonl(src / f"p{i % 2}" / f"h{i}.jsonl", rows)
        out.append(d)
        units += len(rows)
    return out, units


def settings(src: Path, sock: Path, **over: Any) -> Any:
    return load_settings(None, environ={}, overrides={
        "embed": {"enabled": False},  # lexical: no model paid for here
        "watch": {"sources": [{"agent": "generic", "path": src}], "default_sources": False,
                  "reconcile_seconds": 0.3},
        "server": {"socket": sock, "tcp_port": 0},
        "retention": {"enabled": False},
        "consolidate": {"timezone": TZ, **over.pop("consolidate", {})},
        **over})


@contextlib.asynccontextmanager
async def daemon(tmp_path: Path, src: Path, sock: Path, clock: SettableClock, **over: Any):
    d = Daemon(settings(src, sock, **over), resolve_paths(tmp_path / "home"), environ={},
               clock=clock)
    await d.start()
    try:
        yield d, AsyncClient(sock)
    finally:
        await d.stop()


async def caught_up_with(c: AsyncClient, units: int) -> dict[str, Any]:
    async def ok() -> dict[str, Any] | None:
        st = await c.status()
        return st if st["caught_up"] and st["units"] >= units else None
    return await wait_for(ok, timeout=30)


async def history_done(c: AsyncClient, timeout: float = 60) -> dict[str, Any]:
    async def done() -> dict[str, Any] | None:
        h = (await c.status())["consolidation"]["history"]
        return h if h.get("looked") and h["days_left"] == 0 and h["days_done"] else None
    return await wait_for(done, timeout=timeout)


def runs(home: Path) -> list[tuple[str, str, int]]:
    with contextlib.closing(sqlite3.connect(home / "data" / "memoryd.db")) as conn:
        return conn.execute("SELECT day, trigger, ok FROM consolidation_runs "
                            "ORDER BY id").fetchall()


def memory_dir(home: Path) -> Path:
    return home / "data" / "memory"


async def test_first_start_consolidates_the_history_oldest_day_first(tmp_path, src, sock):
    """A first start on two weeks of history: after the backfill, each day gets its daily
    note and its rules reach MEMORY.md without a run by hand; status shows the progress
    and per day what was admitted."""
    days, units = history_files(src, dt.date(2026, 9, 20), 14)
    clock = SettableClock(dt.datetime(2026, 10, 10, 12, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await caught_up_with(c, units)
        h = await history_done(c)
        assert h["days_with_sessions"] == 14 and h["days_done"] == 14 and h["next"] is None
        st = (await c.status())["consolidation"]
        mem = (memory_dir(home) / "MEMORY.md").read_text()
        listed = await c.request("GET", "/v1/daily")
    for day in days:
        assert (memory_dir(home) / f"{day}.md").exists(), day
    for rule in ("release branch", "snake_case", "British English", "--dry-run first",
                 "模块名"):
        assert rule in mem
    assert listed["dates"] == sorted(listed["dates"]) or set(days) <= set(listed["dates"])
    done = [r for r in runs(home) if r[1] == "history"]
    assert [r[0] for r in done] == days  # oldest first, each day once
    assert all(r[2] == 1 for r in done)
    recent = st["days"]
    assert [x["date"] for x in recent] == sorted(days, reverse=True)[:len(recent)]
    assert recent[0]["sessions"] == 1 and recent[0]["last_trigger"] == "history"
    assert all(x["confirmed"] or x["added"] for x in recent)  # each day's rule is held
    assert st["warnings"] == []


async def test_a_history_years_in_the_past_and_a_new_source_later(tmp_path, src, sock):
    """Sessions from 2019 with the clock in 2026: every day consolidated on its own
    clock. A source added later with older days is found at the nightly firing."""
    days, units = history_files(src, dt.date(2019, 3, 1), 6, step=2)
    clock = SettableClock(dt.datetime(2026, 10, 10, 12, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await caught_up_with(c, units)
        await history_done(c)
        for day in days:
            assert (memory_dir(home) / f"{day}.md").exists(), day
        held = (memory_dir(home) / "MEMORY.md").read_text()
        hist = memory_dir(home) / "HISTORY.md"
        held += hist.read_text() if hist.exists() else ""
        assert "release branch" in held and "British English" in held
        # a new day of 2019 arrives (a new source, a restore): the nightly firing finds it
        write_jsonl(src / "p9" / "late.jsonl", day_msgs("late", "2019-02-10", RULES[3]))
        await caught_up_with(c, units + 5)
        await d.crons.nightly()
        # the day's run is recorded after its note is written: wait for the record
        await wait_for(lambda: ("2019-02-10", "history", 1) in runs(home), timeout=30)
        assert (memory_dir(home) / "2019-02-10.md").exists()
    assert [r[0] for r in runs(home) if r[1] == "history"] == [*days, "2019-02-10"]


async def test_range_runs_by_hand_and_bad_ranges_are_400(tmp_path, src, sock, capsys):
    days, units = history_files(src, dt.date(2026, 9, 1), 5)
    clock = SettableClock(dt.datetime(2026, 10, 10, 12, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock, consolidate={"history": False}) as (d, c):
        await caught_up_with(c, units)
        assert (await c.status())["consolidation"]["history"] == {
            "looked": False, "done_this_run": 0}
        dry = (await c.run_job("consolidate", {"since": "2026-09-02", "until": "2026-09-03",
                                               "dry_run": True}))["result"]
        assert [x["date"] for x in dry["days"]] == ["2026-09-02", "2026-09-03"]
        assert not list(memory_dir(home).glob("2026-09-*.md"))
        code, out, _ = await ctl(capsys, sock, "run", "consolidate", "--since", "2026-09-02")
        assert code == 0
        assert "consolidated 4 days with sessions from 2026-09-02 to 2026-10-10" in out
        assert "2026-09-05: 1 sessions" in out
        assert sorted(p.stem for p in memory_dir(home).glob("2026-09-*.md")) == days[1:]
        for params, field in [({"since": "2026-09-05", "until": "2026-09-01"}, "until"),
                              ({"since": "09/01/2026"}, "since"),
                              ({"since": "2026-09-01", "date": "2026-09-02"}, "date"),
                              ({"until": "2026-09-01"}, "until"),
                              ({"since": "2026-09-01", "until": "never"}, "until")]:
            with pytest.raises(ApiError) as e:
                await c.run_job("consolidate", params)
            assert e.value.status == 400 and e.value.field == field, params
    assert {r[1] for r in runs(home)} == {"range"}


async def test_status_warns_on_days_with_sessions_that_admitted_nothing_and_on_failure(
        tmp_path, src, sock, capsys):
    for i, day in enumerate(("2026-10-01", "2026-10-02", "2026-10-03")):
        write_jsonl(src / "p" / f"t{i}.jsonl", small_talk(f"t{i}", day))
    clock = SettableClock(dt.datetime(2026, 10, 4, 12, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await caught_up_with(c, 12)
        await history_done(c)
        st = (await c.status())["consolidation"]
        assert [x["date"] for x in st["days"]] == ["2026-10-03", "2026-10-02", "2026-10-01"]
        assert all(x["sessions"] == 1 and x["added"] == 0 for x in st["days"])
        assert len(st["warnings"]) == 1
        assert "ran on 3 days with sessions (2026-10-01 to 2026-10-03) and admitted " \
               "nothing" in st["warnings"][0]
        code, out, _ = await ctl(capsys, sock, "status")
        assert "consol.  history 3/3 days consolidated" in out
        assert "2026-10-03  1 runs" in out and "+0 added" in out
        assert "WARNING  consolidation ran on 3 days" in out
        # a failed run: the day's note cannot be written (a folder in its place)
        write_jsonl(src / "p" / "t9.jsonl", day_msgs("t9", "2026-10-04", RULES[0]))
        await caught_up_with(c, 17)
        (memory_dir(home) / "2026-10-04.md").mkdir()
        with pytest.raises(ApiError):
            await c.run_job("consolidate", {"date": "2026-10-04"})
        st = (await c.status())["consolidation"]
        assert st["days"][0]["date"] == "2026-10-04" and st["days"][0]["failed"] == 1
        assert st["days"][0]["sessions"] is None
        assert any("failed: IsADirectoryError" in w for w in st["warnings"])
        code, out, _ = await ctl(capsys, sock, "status")
        assert "2026-10-04  1 runs" in out and "FAILED: IsADirectoryError" in out
        (memory_dir(home) / "2026-10-04.md").rmdir()
        r = (await c.run_job("consolidate", {"date": "2026-10-04"}))["result"]
        assert r["memory"]["added"]
        st = (await c.status())["consolidation"]
        assert st["warnings"] == []  # a day admitted again, and the last run is ok
        assert st["days"][0]["runs"] == 2 and st["days"][0]["last_ok"]


async def test_a_failing_day_holds_retention_then_is_left_and_the_rest_goes_on(
        tmp_path, src, sock):
    """History still to consolidate holds the scheduled retention (archived first, its
    days would be consolidated without their sessions); a day that keeps failing is
    left after three runs, so it holds neither the other days nor retention for good."""
    days, units = history_files(src, dt.date(2025, 1, 10), 3)
    clock = SettableClock(dt.datetime(2026, 10, 10, 12, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    memory_dir(home).mkdir(parents=True)
    (memory_dir(home) / f"{days[0]}.md").mkdir()  # the oldest day's note cannot be written
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await caught_up_with(c, units)
        await wait_for(lambda: any(not ok for _, _, ok in runs(home)), timeout=30)
        assert (await c.status())["consolidation"]["history"]["days_left"] == 3
        await d.retention.scheduled()
        assert "3 days of history are not consolidated yet" in d.retention.last_run["postponed"]
        assert (await c.status())["units"] == units  # nothing archived
        while len([r for r in runs(home) if r[0] == days[0]]) < 3:
            with pytest.raises(IsADirectoryError):
                await d.catch_up.job({})
        while (await d.catch_up.job({}))["day"] is not None:
            pass
        h = (await c.status())["consolidation"]
        assert h["history"]["days_left"] == 0 and h["history"]["days_done"] == 3
        assert any(f"of {days[0]}" in w and "IsADirectoryError" in w for w in h["warnings"]) \
            or h["days"][-1]["failed"] == 3
        (memory_dir(home) / f"{days[0]}.md").rmdir()  # (retention would fold it)
        await d.retention.scheduled()
        assert (await c.status())["units"] == 0  # archived now: 600 days idle
    assert [r[0] for r in runs(home) if r[2]] == days[1:]
