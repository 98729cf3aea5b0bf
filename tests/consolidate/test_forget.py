"""Forgetting a session reaches the memory files: MEMORY.md items and daily-note lines
that only the forgotten session stood behind leave; what another session also said stays
(with the forgotten one gone from its provenance); the user's own lines are never touched.
A real daemon, real JSONL, real files, memoryctl and the API over the Unix socket."""

from __future__ import annotations

import asyncio
import datetime as dt

from memoryd.cli.commands import main
from memoryd.consolidate.clock import SettableClock
from tests.helpers import write_jsonl
from tests.consolidate.test_consolidate import DAY1, daemon, ingested, memory, msgs, note

S2 = [("user", "Again: commit messages in Conventional Commits format, I told you last time."),
      ("user", "Remember that the staging server runs Ubuntu 22.04 with Python 3.12."),
      ("user", "We decided to cache the cover images in Redis for a day."),
      ("assistant", "Done: covers are cached in Redis with a 24 h TTL.")]


async def test_forget_session_removes_what_only_it_stood_behind(tmp_path, src, sock, capsys):
    write_jsonl(src / "shelfie" / "s1.jsonl", msgs("s1", "2026-10-05", DAY1))
    write_jsonl(src / "shelfie" / "s2.jsonl", msgs("s2", "2026-10-05", S2, hour=9))
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    mdir = home / "data" / "memory"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1) + len(S2))
        await c.run_job("consolidate", {"date": "2026-10-05"})
        mem = memory(home)
        assert "Ubuntu 22.04" in mem and "Conventional Commits" in mem
        day = note(home, "2026-10-05")
        assert "Redis" in day and "ISBN" in day
        # the user's own lines: one with the very item memoryd wrote, under their source
        (mdir / "MEMORY.md").write_text(
            mem + "2026-10-05|me|Remember that the staging server runs Ubuntu 22.04 with "
                  "Python 3.12.\n2026-10-05|me|Ship on Thursdays only\n")
        (mdir / "2026-10-05.md").write_text(day.replace(
            "## Decisions\n", "## Decisions\n- call the printer vendor about covers (me)\n"))
        n = next(i for i, ln in enumerate(memory(home).splitlines(), 1)
                 if "Conventional" in ln)
        why = await c.request("GET", f"/v1/memory/why/{n}")
        assert {s["session_id"] for s in why["items"][0]["sessions"]} == {"shelfie/s1",
                                                                           "shelfie/s2"}

        code = await asyncio.to_thread(main, ["--socket", str(sock), "sessions", "forget",
                                              "shelfie/s2", "--yes"])
        out = capsys.readouterr().out
        assert code == 0 and "MEMORY.md items" in out and "daily-note lines" in out, out

        mem = memory(home).splitlines()
        made = [ln for ln in mem if "|generic" in ln]
        assert not any("Ubuntu" in ln for ln in made)  # only s2 said it: gone
        assert "2026-10-05|me|Remember that the staging server runs Ubuntu 22.04 with " \
               "Python 3.12." in mem  # the user's line with the same item stays
        assert "2026-10-05|me|Ship on Thursdays only" in mem
        assert sum("Conventional Commits" in ln for ln in mem) == 1  # s1 said it too
        n = next(i for i, ln in enumerate(mem, 1) if "Conventional" in ln)
        why = await c.request("GET", f"/v1/memory/why/{n}")
        assert [s["session_id"] for s in why["items"][0]["sessions"]] == ["shelfie/s1"]

        day = note(home, "2026-10-05")
        assert "Redis" not in day and "ISBN" in day
        assert "- call the printer vendor about covers (me)" in day
        for sec in ("## Topics", "## Decisions", "## Tool Activity", "## Open Questions"):
            assert sec in day

        # forgetting the other session too empties memoryd's share, the user's stays
        gone = await c.forget("shelfie/s1")
        assert any("Conventional" in x for x in gone["memory_items_removed"])
        assert any("ISBN" in x for x in gone["daily_lines_removed"])
        mem = memory(home).splitlines()
        assert [ln for ln in mem if ln[:4].isdigit()] == [
            "2026-10-05|me|Remember that the staging server runs Ubuntu 22.04 with "
            "Python 3.12.", "2026-10-05|me|Ship on Thursdays only"]
        assert "- call the printer vendor about covers (me)" in note(home, "2026-10-05")
        # nothing left to prune: a consolidation of the day writes nothing back
        r = (await c.run_job("consolidate", {"date": "2026-10-05"}))["result"]
        assert r["sessions"] == 0 and r["memory"]["added"] == []
