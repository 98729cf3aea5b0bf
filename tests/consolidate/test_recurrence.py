"""Corrections repeated across sessions gain weight: counted by near-duplicate matching
of what the user said in other sessions (Latin words and CJK bigrams), not only by
marker words. Pure functions, then a real daemon over two days."""

from __future__ import annotations

import datetime as dt

from memoryd.consolidate import recurrence
from memoryd.consolidate.admission import Candidate
from memoryd.consolidate.clock import SettableClock
from tests.helpers import write_jsonl
from tests.consolidate.test_consolidate import daemon, ingested, memory, msgs

SAID = {1: "Use tabs here, not spaces.", 2: "tabs please, not spaces.",
        3: "缩进用 tab，不是空格。", 4: "用 tab 缩进就行，不是空格。",
        5: "Let's keep the current layout for now.", 6: "Let's keep the current layout for now.",
        7: "What is the capital of Australia?", 8: "What is the capital of Australia?",
        9: "Remember that I always want answers in English.",
        10: "Answers in English always, please."}


def pool() -> recurrence.Pool:
    # unit i said in session i: every statement is in its own session
    return recurrence.Pool({i: recurrence.statements(i, i, t) for i, t in SAID.items()})


def make(sc, uid: int) -> Candidate:
    return Candidate(text=sc.text, importance=sc.score, source="a", scope=None,
                     session_pk=uid, unit_ids=[uid], reasons=list(sc.reasons))


def test_recurrence_promotes_corrections_said_in_two_sessions_en_and_zh():
    p = pool()
    got = {}
    for uid in SAID:
        out = recurrence.apply([], p.per_unit[uid], p, make)
        got[uid] = [c.text for c in out]
        for c in out:
            assert c.importance >= 3 and "stated in 2 sessions +1" in c.reasons
            assert [pk for pk, _ in c.evidence] == [uid + 1 if uid % 2 else uid - 1]
    assert got[1] == ["Use tabs here, not spaces."] and got[2] == ["tabs please, not spaces."]
    assert got[3] and got[4]  # Chinese, by CJK bigrams
    assert got[5] == got[6] == got[7] == got[8] == []  # transient, questions: never


def test_recurrence_weighs_a_q1_candidate_said_elsewhere_and_joins_provenance():
    p = pool()
    (st,) = p.per_unit[9]
    c = make(st.scored, 9)
    before = c.importance
    (out,) = recurrence.apply([c], p.per_unit[9], p, make)
    assert out is c and c.importance == before + 1 and c.evidence == [(10, [10])]
    # said once only: untouched
    alone = recurrence.Pool({9: p.per_unit[9]})
    c2 = make(st.scored, 9)
    assert recurrence.apply([c2], p.per_unit[9], alone, make) == [c2]
    assert c2.importance == before and c2.evidence == []


async def test_correction_repeated_across_sessions_reaches_memory(tmp_path, src, sock):
    d1 = [("user", "Set up the lint step for the web app."),
          ("assistant", "Added the lint step, with spaces for indentation."),
          ("user", "Use tabs here, not spaces."),
          ("user", "Let's keep the current layout for now.")]
    d2 = [("user", "Add a test script to package.json."),
          ("assistant", "Added, indented with spaces."),
          ("user", "tabs please, not spaces."),
          ("user", "Let's keep the current layout for now.")]
    write_jsonl(src / "web" / "a.jsonl", msgs("a", "2026-10-05", d1))
    write_jsonl(src / "web" / "b.jsonl", msgs("b", "2026-10-07", d2))
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(d1) + len(d2))
        await c.run_job("consolidate", {"date": "2026-10-05"})
        assert "tabs" not in memory(home)  # said once, no marker word: not yet
        clock.set(dt.datetime(2026, 10, 7, 22, tzinfo=dt.UTC))
        r = (await c.run_job("consolidate", {"date": "2026-10-07"}))["result"]
        (added,) = r["memory"]["added"]
        assert added["item"] == "tabs please, not spaces." and "stated in 2 sessions" in added["why"]
        mem = memory(home)
        assert "layout" not in mem
        n = next(i for i, ln in enumerate(mem.splitlines(), 1) if "tabs" in ln)
        why = await c.request("GET", f"/v1/memory/why/{n}")
        (item,) = why["items"]
        assert {s["session_id"] for s in item["sessions"]} == {"web/a", "web/b"}
        assert item["provenance"]["confirmations"] == 1
        # each session on the day it said it, not the day of the consolidation
        assert {s["session_id"]: s["day"] for s in item["sessions"]} == {
            "web/a": "2026-10-05", "web/b": "2026-10-07"}
        assert item["provenance"]["first_seen"] == "2026-10-05"
        assert item["provenance"]["last_confirmed"] == "2026-10-07"
