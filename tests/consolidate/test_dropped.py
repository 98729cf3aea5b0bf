"""`to_memory` says what it dropped and why (duplicate, superseded, below threshold,
secret), in the API's answer and in memoryctl's output. A real daemon, real JSONL."""

from __future__ import annotations

import asyncio
import datetime as dt

from memoryd.cli.commands import main
from memoryd.consolidate.clock import SettableClock
from tests.helpers import write_jsonl
from tests.consolidate.test_consolidate import DAY1, daemon, ingested, memory, msgs

SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
S2 = [("user", "Remember that I want commit messages in Conventional Commits format, always."),
      ("user", f"Remember that the deploy token is {SECRET}."),
      ("user", "The footer could be a bit darker."),
      ("user", "We use Moment.js for dates in this codebase."),
      ("user", "From now on we use date-fns instead of Moment.js for dates in this codebase.")]


async def test_to_memory_lists_what_it_dropped_and_why(tmp_path, src, sock, capsys):
    write_jsonl(src / "shelfie" / "s1.jsonl", msgs("s1", "2026-10-05", DAY1))
    write_jsonl(src / "shelfie" / "s2.jsonl", msgs("s2", "2026-10-06", S2))
    clock = SettableClock(dt.datetime(2026, 10, 6, 22, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1) + len(S2))
        await c.run_job("consolidate", {"date": "2026-10-05"})
        r = await c.request("POST", "/v1/sessions/shelfie/s2/summarize",
                            query={"to_memory": "true", "wait": "true"})
        m = r["to_memory"]
        why = {d["reason"]: d for d in m["dropped"]}
        assert set(why) == {"duplicate", "secret", "below threshold", "superseded"}, m
        assert "Conventional Commits" in why["duplicate"]["item"]
        assert "[REDACTED]" in why["secret"]["item"] and SECRET not in str(r)
        assert "footer" in why["below threshold"]["item"]
        assert why["below threshold"]["why"].startswith("score ")
        assert "Moment.js" in why["superseded"]["item"]
        assert "date-fns" in why["superseded"]["why"]
        mem = memory(home)
        assert "date-fns" in mem and "REDACTED" not in mem and "footer" not in mem
        assert sum("Conventional Commits" in ln for ln in mem.splitlines()) == 1

        code = await asyncio.to_thread(main, ["--socket", str(sock), "sessions", "summarize",
                                              "shelfie/s2", "--to-memory"])
        out = capsys.readouterr().out
        assert code == 0
        assert "dropped (duplicate): I want commit messages" in out
        assert "dropped (secret): " in out and SECRET not in out
        assert "dropped (below threshold): The footer could be a bit darker." in out

        # a day's consolidation counts the sentences below the threshold
        code = await asyncio.to_thread(main, ["--socket", str(sock), "run", "consolidate",
                                              "--date", "2026-10-06", "--dry-run"])
        out = capsys.readouterr().out
        assert code == 0 and "dropped (secret)" in out and "sentences" in out
