"""Consolidation's CPU work runs off the event loop (a real daemon, real JSONL, real SQLite).

A day's extractive note items and admission candidates take seconds per long session on a
loaded machine. Run on the event loop, they held it for all of a day's sessions at once:
at first start, the history's consolidation (2,000 units) kept the loop for up to 14 s,
searches hung that long, and an appended line waited as long to be stored and found
(bench/ingest_lag.py missed appends; bench/mechanisms.md). Which thread runs that work is
observed with a profile hook on the loop's thread: no timing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
import threading
from pathlib import Path
from typing import Any

from memoryd.config import load_settings
from memoryd.consolidate import candidates, findings, recurrence, scorer, signals, subjects
from memoryd.consolidate.clock import SettableClock
from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths
from memoryd.summarize import extractive
from tests.helpers import AsyncClient, wait_for, write_jsonl

CPU_MODULES = {m.__file__ for m in (candidates, findings, recurrence, scorer, signals,
                                    subjects, extractive)}
"""Where a session's extractive work is done (pure functions over its rows)."""

TURNS = [("user", "Remember that I want commit messages in Conventional Commits format."),
         ("assistant", "Noted: Conventional Commits from now on."),
         ("user", "FYI, all our tests are Jest: pnpm test runs jest with the next/jest preset."),
         ("user", "We decided to store the ISBN-13 as a string column."),
         ("assistant", "Done: the column is a string now, and the tests pass."),
         ("user", "Is the typhoon coming tonight? lol")]


def msgs(sid: str, day: str) -> list[dict[str, Any]]:
    t0 = dt.datetime.fromisoformat(f"{day}T02:00:00+00:00")
    return [{"role": role, "content": text, "id": f"{sid}-{i:03d}",
             "timestamp": (t0 + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for i, (role, text) in enumerate(TURNS)]


@contextlib.contextmanager
def calls_on_this_thread(files: set[str | None]):  # type: ignore[no-untyped-def]
    """The functions of `files` called on this thread meanwhile (`sys.setprofile`: this
    thread's only; the default executor's threads are not watched)."""
    seen: list[str] = []
    me = threading.get_ident()

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename in files:
            seen.append(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")

    sys.setprofile(hook)
    try:
        yield seen
    finally:
        sys.setprofile(None)
        assert threading.get_ident() == me


async def test_a_days_extractive_work_runs_off_the_event_loop(tmp_path, src, sock):
    for sid in ("s1", "s2", "s3"):
        write_jsonl(src / "shelfie" / f"{sid}.jsonl", msgs(sid, "2026-10-05"))
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    settings = load_settings(None, environ={}, overrides={
        "embed": {"enabled": False},  # lexical: no model paid for here
        "watch": {"sources": [{"agent": "generic", "path": src}], "default_sources": False,
                  "reconcile_seconds": 0.3},
        "server": {"socket": sock, "tcp_port": 0},
        "summary": {"enabled": False},
        "consolidate": {"timezone": "UTC"}})
    d = Daemon(settings, resolve_paths(tmp_path / "home"), environ={}, clock=clock)
    await d.start()
    try:
        c = AsyncClient(sock)

        async def ingested() -> bool:
            st = await c.status()
            return st["caught_up"] and st["units"] >= 3 * len(TURNS)

        await wait_for(ingested, timeout=20)
        with calls_on_this_thread(CPU_MODULES) as on_loop:
            r = (await c.run_job("consolidate", {"date": "2026-10-05"}))["result"]
        # the work was done (somewhere): three sessions noted, a preference admitted
        assert r["sessions"] == 3 and r["daily"]["added"] > 0
        assert r["memory"]["added"]
        assert on_loop == [], sorted(set(on_loop))[:10]
    finally:
        await d.stop()
