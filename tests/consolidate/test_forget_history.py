"""Forget reaches HISTORY.md and follows `forget --query`: what only the forgotten
session (or the forgotten turns) stood behind leaves MEMORY.md and HISTORY.md, a "replaced
by" pointer to a forgotten item loses its text, a folded day's paragraph is rewritten
without the session's items (or dropped when nothing is left), and the user's own lines
stay. A real daemon, real JSONL, real files, the API over the Unix socket."""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path

from memoryd.consolidate import forget
from memoryd.consolidate.clock import SettableClock
from tests.helpers import write_jsonl
from tests.consolidate.test_consolidate import (
    DAY1,
    DAY2,
    daemon,
    history,
    ingested,
    memory,
    msgs,
)

MINE = "- 2026-10-01 my own note: Jest was slow on CI anyway\n"


@contextlib.asynccontextmanager
async def consolidated(tmp_path: Path, src: Path, sock: Path, transcripts: dict[str, list],
                       days: list[str], at: dt.datetime, **over):
    """A real daemon at `at` over these transcripts (path under `src` -> records), each
    record ingested and each of `days` consolidated: (client, clock, home)."""
    for path, recs in transcripts.items():
        write_jsonl(src / path, recs)
    clock = SettableClock(at.timestamp())
    async with daemon(tmp_path, src, sock, clock, **over) as (_, c):
        await ingested(c, sum(len(r) for r in transcripts.values()))
        for day in days:
            await c.run_job("consolidate", {"date": day})
        yield c, clock, tmp_path / "home"


def lines_with(text: str, part: str) -> list[str]:
    return [ln for ln in text.splitlines() if part in ln]


def test_drop_history_pure():
    text = ("# HISTORY\n\n"
            "- 2026-10-08 superseded: 2026-10-05|a:p|all tests are Jest → replaced by: "
            "Vitest from today (MEMORY.md, a:p)\n"
            "- 2026-10-09 demoted: 2026-10-01|a|keep it short (over the 3-entry cap)\n"
            "- 2026-10-08 superseded: 2026-10-05|me|all tests are Jest → replaced by: x (y)\n"
            "**2026-03-02** — Topics: books (a · p); covers; here (a · p) | Decisions: "
            "ISBN as text (a · p)\n"
            "**2026-03-03** — Topics: only (a · p)\n")
    moved = {"keep it short": "a"}
    notes = {"2026-03-02": ["covers; here (a · p)", "ISBN as text (a · p)"],
             "2026-03-03": ["only (a · p)"]}
    new, gone = forget.drop_history(text, moved, notes, {"vitest from today"})
    assert "demoted" not in new and any("keep it short" in x for x in gone)
    assert "replaced by: (a forgotten item) (MEMORY.md, a:p)" in new
    assert "Vitest" not in new
    assert "2026-10-05|me|all tests are Jest → replaced by: x (y)" in new  # not ours
    assert "**2026-03-02** — Topics: books (a · p)\n" in new  # a part emptied goes
    assert "2026-03-03" not in new  # nothing left: the paragraph goes
    assert forget.drop_history(new, moved, notes, {"vitest from today"})[1] == []


async def test_forget_removes_superseded_lines_and_forgotten_successors(tmp_path, src, sock):
    async with consolidated(tmp_path, src, sock, {
            "shelfie/s1.jsonl": msgs("s1", "2026-10-05", DAY1),
            "shelfie/s2.jsonl": msgs("s2", "2026-10-08", DAY2)}, ["2026-10-05", "2026-10-08"],
            dt.datetime(2026, 10, 8, 22, tzinfo=dt.UTC)) as (c, _, home):
        hpath = home / "data" / "memory" / "HISTORY.md"
        h = history(home)
        (moved,) = lines_with(h, "superseded:")
        assert "Jest" in moved and "replaced by:" in moved and "Vitest" in moved
        hpath.write_text(h + MINE)  # the user's own line

        # the successor's session goes: the pointer keeps the old item, loses the new text
        gone = await c.forget("shelfie/s2")
        assert gone["history_lines_removed"], (gone, history(home), memory(home))
        assert "Vitest" not in memory(home) and "Vitest" not in history(home)
        (moved,) = lines_with(history(home), "superseded:")
        assert "Jest" in moved and "(a forgotten item)" in moved

        # the superseded item's own session goes: its HISTORY.md line goes with it
        gone = await c.forget("shelfie/s1")
        assert any("Jest" in x for x in gone["history_lines_removed"])
        h = history(home)
        assert "superseded:" not in h and "Jest" not in h.replace(MINE, "")
        assert MINE in h


async def test_forget_rewrites_folded_day_paragraphs(tmp_path, src, sock):
    other = [("user", "We decided to print the shelf labels on the Brother printer."),
             ("assistant", "Done: the labels template is in labels/brother.lbx.")]
    async with consolidated(tmp_path, src, sock, {
            "p/s1.jsonl": msgs("s1", "2026-03-02", DAY1),
            "p/s3.jsonl": msgs("s3", "2026-03-02", other, hour=9)}, ["2026-03-02"],
            dt.datetime(2026, 3, 2, 22, tzinfo=dt.UTC),
            retention={"units_keep_days": 0}) as (c, clock, home):
        hpath = home / "data" / "memory" / "HISTORY.md"
        clock.set(dt.datetime(2026, 10, 2, 12, tzinfo=dt.UTC))
        r = (await c.run_job("retention", {}))["result"]
        assert r["daily_notes"]["folded"] == ["2026-03-02"]
        (para,) = lines_with(history(home), "**2026-03-02**")
        assert "ISBN" in para and "Brother" in para
        hpath.write_text(history(home) + MINE)

        gone = await c.forget("p/s1")
        assert any("ISBN" in x for x in gone["history_lines_removed"])
        (para,) = lines_with(history(home), "**2026-03-02**")
        assert "ISBN" not in para and "Brother" in para

        await c.forget("p/s3")
        h = history(home)
        assert "**2026-03-02**" not in h and MINE in h


async def test_forget_by_query_takes_memory_items_only_those_turns_stood_behind(
        tmp_path, src, sock):
    s2 = [("user", "Again: commit messages in Conventional Commits format, I told you."),
          ("user", "Remember that the staging server runs Ubuntu 22.04 with Python 3.12.")]
    async with consolidated(tmp_path, src, sock, {
            "shelfie/s1.jsonl": msgs("s1", "2026-10-05", DAY1),
            "shelfie/s2.jsonl": msgs("s2", "2026-10-05", s2, hour=9)}, ["2026-10-05"],
            dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC)) as (c, _, home):
        mpath = home / "data" / "memory" / "MEMORY.md"
        mem = memory(home)
        assert "Ubuntu 22.04" in mem and "Conventional Commits" in mem
        mpath.write_text(mem + "2026-10-05|me|the old staging Ubuntu box is in the closet\n")

        r = await c.request("POST", "/v1/forget", {"query": "staging ubuntu",
                                                    "dry_run": False})
        assert r["units"] == 1
        assert any("Ubuntu" in x for x in r["memory"]["memory_items_removed"])
        mem = memory(home).splitlines()
        assert not any("staging server" in ln for ln in mem)
        assert "2026-10-05|me|the old staging Ubuntu box is in the closet" in mem  # theirs
        assert r["memory_entries"] == 1  # and it is named for review

        # an item two sessions stood behind loses the forgotten turns' session only
        r = await c.request("POST", "/v1/forget", {"query": "told conventional commits",
                                                    "dry_run": False})
        assert r["units"] == 1 and r["memory"]["memory_items_removed"] == []
        mem = memory(home).splitlines()
        n = next(i for i, ln in enumerate(mem, 1) if "Conventional" in ln)
        why = await c.request("GET", f"/v1/memory/why/{n}")
        assert [s["session_id"] for s in why["items"][0]["sessions"]] == ["shelfie/s1"]
