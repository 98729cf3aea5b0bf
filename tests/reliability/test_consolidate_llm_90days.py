"""Issue 9 proof: 90 days of consolidation with a model (the fake OpenAI-compatible
server, tests/fakes), end to end through a real daemon: the admission prompt and what
it carries (never a secret), the model's items routed (Q1 to MEMORY.md, Q2/Q3 not),
supersession by the model, the daily token budget (a day whose prompt does not fit goes
extractive), malformed output (extractive for that day), and the server dying mid-run
(every later day extractive, nothing lost): notes, MEMORY.md and HISTORY.md stay right."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from memoryd.consolidate.clock import SettableClock
from memoryd.consolidate.model import SYSTEM
from memoryd.consolidate.scorer import similarity
from memoryd.tokens import estimate_tokens
from tests.fakes import fake_llm  # noqa: F401 - a fixture
from tests.helpers import AsyncClient, wait_for, write_jsonl
from tests.consolidate.test_consolidate import ZH, _units, daemon, history, memory, msgs

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(1200)]

START = dt.date(2026, 6, 1)
TOOLS = ["ruff", "pnpm", "cargo", "helm", "bun", "nix", "make"]
BUDGET = 2500  # tokens per UTC day: one ordinary admission call fits, a huge day does not
SECRET = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2
BIG_DAYS = {15, 45}  # a pasted wall of text: the prompt is over the budget
GARBAGE_DAY = 20
DEATH_DAY = 60  # the model server goes away


def day_turns(i: int) -> list[tuple[str, str]]:
    tool = TOOLS[i % 7]
    turns = [("user", f"The {tool} build looks off today, can you check?"),
             ("assistant", "Checked: a stale cache; cleared it."),
             ("user", "What is the tallest mountain in Africa?"),
             ("user", "thanks")]
    if i % 3 == 0:
        turns.insert(1, ("user", f"Remember that job {i} deploys to region r{i} via {tool}, "
                                 "always."))
    if i in (3, 33):
        turns.insert(1, ("user", "Remember that the staging database is Postgres "
                                 f"{15 if i == 3 else 16} on db0{1 if i == 3 else 2}."))
    if i == 7:
        turns.insert(1, ("user", f"Use the token {SECRET} for the staging deploy."))
    if i in BIG_DAYS:
        turns.insert(1, ("user", "Here is the whole log:\n" + "\n".join(
            f"2026-06-{i % 28 + 1:02d} 10:{k % 60:02d} worker-{k} finished batch {k} in "
            f"{k * 7 % 300} ms" for k in range(400))))
    if i % 10 == 0:
        turns += ZH
    return turns


def model_answer(i: int) -> str:
    """What the model says about day i's session."""
    tool = TOOLS[i % 7]
    items = [{"text": f"The {tool} build looked off; a stale cache", "route": "Q2"},
             {"text": "Tallest mountain in Africa", "route": "Q3"}]
    if i % 3 == 0:
        items.append({"text": f"Job {i} deploys to region r{i} via {tool}", "route": "Q1",
                      "scope": "project", "importance": 5, "reason": "explicit request"})
    if i in (3, 33):
        items.append({"text": "The staging database is Postgres "
                              f"{15 if i == 3 else 16} on db0{1 if i == 3 else 2}",
                      "route": "Q1", "scope": "project", "importance": 9,
                      "supersedes_previous": i == 33, "reason": "environment fact"})
    if i % 10 == 0:
        items.append({"text": "回答尽量简短，先给结论再解释原因", "route": "Q1", "scope": "user",
                      "importance": 8, "reason": "stated preference"})
    return json.dumps({"items": items}, ensure_ascii=False)


async def test_ninety_days_with_a_model_budget_garbage_and_a_dead_server(
        tmp_path, src, sock, fake_llm):  # noqa: F811
    for i in range(90):
        day = (START + dt.timedelta(days=i)).isoformat()
        write_jsonl(src / f"p{i % 2}" / f"d{i}.jsonl", msgs(f"d{i}", day, day_turns(i)))
    big = "\n".join(t for _, t in day_turns(15) if t.startswith("Here is"))
    assert estimate_tokens(big[-12_000:]) + 800 > BUDGET  # the model's input is capped at 12k
    clock = SettableClock()
    home = tmp_path / "home"
    llm = {"model": "openai/fake", "api_base": fake_llm.url, "timeout_s": 5.0,
           "max_retries": 0, "daily_token_budget": BUDGET}
    total = sum(len(day_turns(i)) for i in range(90))
    async with daemon(tmp_path, src, sock, clock, llm=llm,
                      consolidate={"max_entries": 20}) as (d, c):
        slow = AsyncClient(sock)
        slow.sync.timeout = 600  # the first model call imports litellm
        await wait_for(lambda: _units(c, total), timeout=180)
        by_day = {}
        for i in range(90):
            day = START + dt.timedelta(days=i)
            clock.set(dt.datetime.combine(day, dt.time(23), tzinfo=dt.UTC))
            if i == DEATH_DAY:
                await fake_llm.close()
            if i == GARBAGE_DAY:
                fake_llm.garbage_next()
            elif i < DEATH_DAY and i not in BIG_DAYS:
                fake_llm.replies.append(model_answer(i))
            r = (await slow.run_job("consolidate", {"date": day.isoformat()}))["result"]
            by_day[i] = r["sessions_by"]
        assert not fake_llm.replies  # every scripted answer was asked for, in order

        model_days = [i for i in range(DEATH_DAY) if i not in BIG_DAYS | {GARBAGE_DAY}]
        assert all(by_day[i] == {"openai/fake": 1} for i in model_days), by_day
        extractive = sorted(BIG_DAYS | {GARBAGE_DAY} | set(range(DEATH_DAY, 90)))
        assert all(by_day[i] == {"extractive": 1} for i in extractive), by_day

        # the prompts: the admission prompt with the day's words, never the secret, never
        # a day over the budget
        prompts = fake_llm.prompts()
        assert len(prompts) == len(model_days) + 1  # + the garbage day
        assert all(SYSTEM[:60] in p for p in prompts)
        assert any("job 3 deploys to region r3" in p for p in prompts)
        assert SECRET not in json.dumps(fake_llm.requests)
        assert not any("worker-399 finished" in p for p in prompts)

        mem = memory(home)
        entries = [ln for ln in mem.splitlines() if ln[:4].isdigit()]
        assert 0 < len(entries) <= 20
        items = [ln.split("|", 2)[2] for ln in entries]
        assert all(similarity(a, b) < 0.8 for n, a in enumerate(items) for b in items[n + 1:])
        assert sum("先给结论" in ln for ln in entries) == 1  # confirmed every 10 days
        assert "Postgres 16 on db02" in mem and "Postgres 15" not in mem  # superseded
        assert "Postgres 15 on db01" in history(home) and "replaced by" in history(home)
        assert "tallest" not in mem.lower() and "stale cache" not in mem
        assert SECRET not in mem and "REDACTED" not in mem
        makers = set()
        for n in range(1, len(entries) + 1):
            why = await c.request("GET", f"/v1/memory/why/{n}")
            p = why["items"][0]["provenance"]
            assert p is not None
            makers.add(p["made_by"])
        assert makers == {"openai/fake", "extractive"}  # the model's, and after it died
        assert any("job 87 deploys" in ln.lower() for ln in entries)  # extractive still admits

        notes = sorted((home / "data" / "memory").glob("????-??-??.md"))
        assert len(notes) == 90
        for n in notes:
            text = n.read_text()
            lines = [ln for ln in text.splitlines() if ln.startswith("- ")]
            assert len(lines) == len(set(lines)) and lines
            assert all(f"## {s}" in text for s in ("Topics", "Decisions", "Tool Activity",
                                                   "Open Questions"))
            assert "tallest mountain" not in text and SECRET not in text

        clock.set(dt.datetime.combine(START + dt.timedelta(days=90), dt.time(12),
                                      tzinfo=dt.UTC))
        r = (await c.run_job("retention", {}))["result"]
        assert len(r["daily_notes"]["folded"]) == 90 - 30
        assert len(list((home / "data" / "memory").glob("????-??-??.md"))) == 30
