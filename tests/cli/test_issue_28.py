"""Issue 28, items 21-24: memoryctl as a new user meets it, through a real daemon (real
JSONL in a watched dir, real SQLite, the real socket) or the real command line."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json

from memoryd.consolidate.clock import SettableClock
from tests.helpers import ctl, write_jsonl
from tests.test_consolidate import DAY1, daemon, ingested, msgs


async def test_issue_28_every_verb_that_takes_a_session_id_takes_a_unique_prefix(
        tmp_path, src, sock, capsys):
    write_jsonl(src / "shelfie" / "s1.jsonl", msgs("s1", "2026-03-02", DAY1))
    write_jsonl(src / "work" / "a1.jsonl", msgs("a1", "2026-09-30", [("user", "alpha one")]))
    write_jsonl(src / "work" / "a2.jsonl", msgs("a2", "2026-09-30", [("user", "alpha two")]))
    clock = SettableClock(dt.datetime(2026, 10, 2, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1) + 2)
        code, out, err = await ctl(capsys, sock, "sessions", "summarize", "shelf")
        assert code == 0, err
        assert out.startswith("generic shelfie/s1: summary by extractive")
        code, out, _ = await ctl(capsys, sock, "export", "--session", "shelf", "--format",
                                 "jsonl")
        assert code == 0 and len(out.splitlines()) == len(DAY1)
        code, out, _ = await ctl(capsys, sock, "run", "retention")
        assert code == 0 and "shelfie/s1 -> 2026-03" in out
        code, out, err = await ctl(capsys, sock, "archive", "restore", "shelf", "--dry-run")
        assert code == 0, err
        assert out.strip() == f"generic shelfie/s1: {len(DAY1)} archived units, 0 restored " \
                              "(dry run)"
        code, out, _ = await ctl(capsys, sock, "archive", "restore", "shelf")
        assert code == 0 and f"{len(DAY1)} restored" in out
        # an ambiguous prefix names the candidates, in every verb
        for verb in (["sessions", "summarize", "work/a"], ["archive", "restore", "work/a"],
                     ["export", "--session", "work/a"], ["sessions", "forget", "work/a",
                                                         "--yes"],
                     ["sessions", "show", "work/a"]):
            code, _, err = await ctl(capsys, sock, *verb)
            assert code == 1 and "ambiguous" in err, verb
            assert "work/a1" in err and "work/a2" in err, verb
        code, _, err = await ctl(capsys, sock, "sessions", "summarize", "nothing-like-it")
        assert code == 1 and "no session 'nothing-like-it'" in err
        code, out, _ = await ctl(capsys, sock, "sessions", "forget", "work/a2", "--yes")
        assert code == 0 and "forgot generic session work/a2" in out
        code, out, _ = await ctl(capsys, sock, "sessions", "forget", "work/a", "--yes")
        assert code == 0 and "forgot generic session work/a1" in out  # unique now
