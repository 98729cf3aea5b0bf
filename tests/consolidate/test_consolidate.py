"""Consolidation through a real daemon: real JSONL in a watched dir, real SQLite, real
files in the memory dir, the API over the Unix socket, a settable clock."""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from memoryd.client import ApiError
from memoryd.config import load_settings
from memoryd.consolidate.clock import SettableClock
from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths
from tests.fakes import fake_llm  # noqa: F401 - a fixture
from tests.helpers import AsyncClient, wait_for, write_jsonl

TZ = "Asia/Shanghai"


def msgs(sid: str, day: str, turns: list[tuple[str, str]], hour: int = 2) -> list[dict]:
    t0 = dt.datetime.fromisoformat(f"{day}T{hour:02d}:00:00+00:00")
    return [{"role": role, "content": text, "id": f"{sid}-{i:03d}",
             "timestamp": (t0 + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for i, (role, text) in enumerate(turns)]


def settings(src: Path, sock: Path, **over: Any) -> Any:
    return load_settings(None, environ={}, overrides={
        "watch": {"sources": [{"agent": "generic", "path": src}], "default_sources": False,
                  "reconcile_seconds": 0.3},
        "server": {"socket": sock, "tcp_port": 0},
        "summary": {"enabled": False},
        "embed": {"enabled": False},  # lexical: no test here pays for a model
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


async def ingested(c: AsyncClient, units: int) -> None:
    await wait_for(lambda: _units(c, units), timeout=20)


async def _units(c: AsyncClient, n: int) -> bool:
    st = await c.status()
    return st["caught_up"] and st["units"] >= n


DAY1 = [("user", "Morning. The book page crashes, can you take a look?"),
        ("assistant", "Found it: the date is formatted differently on server and client."),
        ("user", "Remember that I want commit messages in Conventional Commits format, always."),
        ("user", "FYI, all our tests are Jest: pnpm test runs jest with the next/jest preset."),
        ("user", "We decided to store the ISBN-13 as a string column."),
        ("user", "Is the typhoon coming tonight? lol"),
        ("user", "thanks")]
DAY2 = [("user", "Bigger change: we're moving the tests off Jest and onto Vitest."),
        ("user", "From today Vitest is our test runner and Jest goes away completely."),
        ("user", "Again: commit messages in Conventional Commits format, I told you last time."),
        ("user", "What's the capital of Australia?")]
ZH = [("user", "以后回答我尽量简短，先给结论，再解释原因。"),
      ("assistant", "好的，以后先给结论。"),
      ("user", "今天把复权因子也拉下来吧，决定单独建一张表 adj_factor_1d。"),
      ("user", "还有个问题没想清楚：存前复权还是后复权？")]


def note(home: Path, day: str) -> str:
    return (home / "data" / "memory" / f"{day}.md").read_text()


def memory(home: Path) -> str:
    p = home / "data" / "memory" / "MEMORY.md"
    return p.read_text() if p.exists() else ""


def history(home: Path) -> str:
    p = home / "data" / "memory" / "HISTORY.md"
    return p.read_text() if p.exists() else ""


async def test_consolidate_days_notes_admission_supersession_and_edits(tmp_path, src, sock):
    write_jsonl(src / "shelfie" / "s1.jsonl", msgs("s1", "2026-10-05", DAY1))
    write_jsonl(src / "kline" / "z1.jsonl", msgs("z1", "2026-10-05", ZH, hour=7))
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1) + len(ZH))
        r = (await c.run_job("consolidate", {"date": "2026-10-05"}))["result"]
        assert r["sessions"] == 2 and r["daily"]["added"] > 0
        text = note(home, "2026-10-05")
        for sec in ("## Topics", "## Decisions", "## Tool Activity", "## Open Questions"):
            assert sec in text
        assert "(generic · shelfie)" in text and "(generic · kline)" in text
        assert "先给结论" in text or "复权" in text  # the Chinese day stays Chinese
        assert "typhoon" not in text  # small talk is nowhere
        mem = memory(home)
        assert "Conventional Commits" in mem and "Jest" in mem and "先给结论" in mem
        assert "typhoon" not in mem and "ISBN" not in mem  # Q2 and Q3 stay out
        # lines keep the seed format; a project fact names its project
        assert any(ln.startswith("2026-10-05|generic:shelfie|") and "Jest" in ln
                   for ln in mem.splitlines())
        assert any(ln.startswith("2026-10-05|generic|") and "Conventional" in ln
                   for ln in mem.splitlines())

        # again, the same day: nothing repeated, nothing rewritten
        before_note, before_mem = note(home, "2026-10-05"), memory(home)
        r = (await c.run_job("consolidate", {"date": "2026-10-05"}))["result"]
        assert r["daily"]["added"] == 0 and r["memory"]["added"] == []
        assert note(home, "2026-10-05") == before_note and memory(home) == before_mem

        # the user edits MEMORY.md between two consolidations: the edit stays
        mpath = home / "data" / "memory" / "MEMORY.md"
        mpath.write_text(mpath.read_text() + "2026-10-06|me|I review every PR on GitHub\n")

        write_jsonl(src / "shelfie" / "s2.jsonl", msgs("s2", "2026-10-08", DAY2))
        await ingested(c, len(DAY1) + len(ZH) + len(DAY2))
        clock.set(dt.datetime(2026, 10, 8, 22, tzinfo=dt.UTC))
        r = (await c.run_job("consolidate", {"date": "2026-10-08"}))["result"]
        mem = memory(home)
        assert "I review every PR on GitHub" in mem
        assert "Vitest" in mem
        assert not any("Jest" in ln and "Vitest" not in ln for ln in mem.splitlines())
        assert "Jest" in history(home) and "replaced by" in history(home)
        assert [a["item"] for a in r["memory"]["superseded"]][0].lower().startswith("all our tests")
        # the repeated correction confirmed the entry instead of adding a line
        assert sum("Conventional Commits" in ln for ln in mem.splitlines()) == 1
        assert "Australia" not in mem

        # provenance: memoryctl memory why N
        n = next(i for i, ln in enumerate(mem.splitlines(), 1) if "Conventional" in ln)
        why = await c.request("GET", f"/v1/memory/why/{n}")
        (item,) = why["items"]
        p = item["provenance"]
        assert p["made_by"] == "extractive" and p["first_seen"] == "2026-10-05"
        assert p["last_confirmed"] == "2026-10-08" and p["confirmations"] == 1
        assert {s["session_id"] for s in item["sessions"]} == {"shelfie/s1",
                                                                "shelfie/s2"}
        hand = next(i for i, ln in enumerate(mem.splitlines(), 1) if "every PR" in ln)
        assert (await c.request("GET", f"/v1/memory/why/{hand}"))["items"][0][
            "provenance"] is None

        # forget drops the session's share of provenance; the other session keeps it
        await c.forget("shelfie/s2")
        why = await c.request("GET", f"/v1/memory/why/{n}")
        assert [s["session_id"] for s in why["items"][0]["sessions"]] == ["shelfie/s1"]

        st = await c.status()
        assert {"consolidate", "consolidate_nightly", "retention"} <= set(
            st["summaries"]["next_runs"]) or not st["consolidation"]["enabled"]


async def test_dry_run_writes_nothing_and_bad_requests_name_the_field(tmp_path, src, sock):
    write_jsonl(src / "p" / "s1.jsonl", msgs("s1", "2026-10-05", DAY1))
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1))
        r = (await c.run_job("consolidate", {"date": "2026-10-05", "dry_run": True}))["result"]
        assert r["dry_run"] and r["daily"]["added"] > 0 and r["memory"]["added"]
        assert memory(home) == "" and not (home / "data" / "memory" / "2026-10-05.md").exists()
        for params, field in (({"date": "2026-13-01"}, "date"), ({"dry_run": "maybe"}, "dry_run"),
                              ({"day": "x"}, "day")):
            with pytest.raises(ApiError) as e:
                await c.run_job("consolidate", params)
            assert e.value.status == 400 and e.value.field == field
        with pytest.raises(ApiError) as e:
            await c.request("GET", "/v1/memory/why/abc")
        assert e.value.status == 400 and e.value.field == "line"
        with pytest.raises(ApiError) as e:
            await c.request("GET", "/v1/memory/why/99")
        assert e.value.status == 404
        # with no date, the clock's local day
        r = (await c.run_job("consolidate", {}))["result"]
        assert r["date"] == "2026-10-06"  # 22:00 UTC is the next morning in Shanghai


async def test_cap_demotes_the_least_useful_to_history(tmp_path, src, sock):
    facts = [("user", f"Remember that the staging server {i} lives in /srv/stage{i}.")
             for i in range(5)]
    write_jsonl(src / "p" / "s1.jsonl", msgs("s1", "2026-10-05", facts))
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock, consolidate={"max_entries": 3}) as (d, c):
        await ingested(c, len(facts))
        r = (await c.run_job("consolidate", {"date": "2026-10-05"}))["result"]
        entries = [ln for ln in memory(home).splitlines() if ln[:4].isdigit()]
        assert len(entries) == 3
        assert len(r["memory"]["demoted"]) == 2
        assert history(home).count("demoted:") == 2


async def test_retention_folds_notes_archives_units_restores_and_forgets(tmp_path, src, sock):
    write_jsonl(src / "p" / "s1.jsonl", msgs("s1", "2026-03-02", DAY1))
    write_jsonl(src / "p" / "s2.jsonl", msgs("s2", "2026-10-01", ZH))
    clock = SettableClock(dt.datetime(2026, 3, 2, 22, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1) + len(ZH))
        await c.run_job("consolidate", {"date": "2026-03-02"})
        assert (home / "data" / "memory" / "2026-03-02.md").exists()
        old_note = note(home, "2026-03-02")
        clock.set(dt.datetime(2026, 10, 2, 12, tzinfo=dt.UTC))
        dry = (await c.run_job("retention", {"dry_run": True}))["result"]
        assert dry["daily_notes"]["folded"] == ["2026-03-02"]
        assert [s["session_id"] for s in dry["archived"]["sessions"]] == ["p/s1"]
        assert (home / "data" / "memory" / "2026-03-02.md").exists()

        r = (await c.run_job("retention", {}))["result"]
        assert r["archived"]["units"] == len(DAY1)
        assert not (home / "data" / "memory" / "2026-03-02.md").exists()
        h = history(home)
        assert "**2026-03-02**" in h
        for item in ("Conventional Commits", "ISBN"):  # nothing important lost
            assert (item in old_note) <= (item in h)
        files = list((home / "data" / "archive").glob("units-*.jsonl.gz"))
        assert [f.name for f in files] == ["units-2026-03.jsonl.gz"]
        recs = [json.loads(x) for x in gzip.decompress(files[0].read_bytes()).splitlines()]
        assert len(recs) == len(DAY1)
        # the hot store let go (plain search reaches the archive); the session stays listed
        hot = await c.search(query="Conventional", mode="or", max_results=5)
        assert hot["results"] and all(x["archived"] == "2026-03" and x["unit_id"] is None
                                      for x in hot["results"] if x["session_id"] == "p/s1")
        assert (await c.session("p/s1"))["session_id"] == "p/s1"
        # idempotent: a second run moves nothing
        again = (await c.run_job("retention", {}))["result"]
        assert again["archived"]["sessions"] == [] and again["daily_notes"]["folded"] == []
        found = await c.request("POST", "/v1/archive/search", {"q": "conventional commits"})
        assert found["total"] == 1 and found["results"][0]["session_id"] == "p/s1"
        listing = await c.request("GET", "/v1/archive")
        assert listing["sessions"][0]["units"] == len(DAY1)

        back = await c.request("POST", "/v1/archive/restore", {"session_id": "p/s1"})
        assert back["restored"] == len(DAY1)
        assert not files[0].exists()
        hot = await c.search(query="Conventional", mode="or", max_results=5)
        assert any(x["session_id"] == "p/s1" for x in hot["results"])
        with pytest.raises(ApiError) as e:
            await c.request("POST", "/v1/archive/search", {"q": ""})
        assert e.value.status == 400 and e.value.field == "q"

        # archive again, then forget: the archive file goes too
        await c.run_job("retention", {})
        assert files[0].exists()
        gone = await c.forget("p/s1")
        assert gone["archived_units_deleted"] == len(DAY1)
        assert not files[0].exists()


async def test_units_keep_days_zero_keeps_everything(tmp_path, src, sock):
    write_jsonl(src / "p" / "s1.jsonl", msgs("s1", "2025-01-02", DAY1))
    clock = SettableClock(dt.datetime(2026, 10, 2, 12, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock,
                      retention={"units_keep_days": 0}) as (d, c):
        await ingested(c, len(DAY1))
        r = (await c.run_job("retention", {}))["result"]
        assert r["archived"]["sessions"] == [] and (await c.status())["units"] == len(DAY1)


def test_auto_summary_switch_and_settings_errors():
    s = load_settings(None, environ={"MEMORYD_AUTO_SUMMARY": "false"})
    assert s.summary.enabled is False
    s = load_settings(None, environ={"MEMORYD_SUMMARY__ENABLED": "false"})
    assert s.summary.enabled is False
    from memoryd.errors import ConfigError

    with pytest.raises(ConfigError, match="consolidate.timezone"):
        load_settings(None, environ={"MEMORYD_CONSOLIDATE__TIMEZONE": "Mars/Olympus"})
    with pytest.raises(ConfigError, match="retention.cron"):
        load_settings(None, environ={"MEMORYD_RETENTION__CRON": "every day"})


@pytest.mark.timeout(400)  # the first model call imports litellm: minutes on a loaded box
async def test_model_admission_validated_with_extractive_fallback(tmp_path, src, sock,
                                                                  fake_llm):  # noqa: F811
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
    day1 = [("user", f"Use the key {secret} for the staging deploy."),
            ("user", "I always indent with tabs, never spaces."),
            ("user", "The CI was flaky this morning.")]
    day2 = [("user", "Remember that the release branch is called ship-it.")]
    write_jsonl(src / "p" / "s1.jsonl", msgs("s1", "2026-10-05", day1))
    write_jsonl(src / "p" / "s2.jsonl", msgs("s2", "2026-10-06", day2))
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    llm = {"model": "openai/fake", "api_base": fake_llm.url, "timeout_s": 5.0,
           "max_retries": 0}
    async with daemon(tmp_path, src, sock, clock, llm=llm) as (d, c):
        await ingested(c, len(day1) + len(day2))
        fake_llm.replies.append(json.dumps({"items": [
            {"text": "User indents with tabs, never spaces", "route": "Q1", "scope": "user",
             "importance": 8, "reason": "stated preference"},
            {"text": "CI was flaky this morning", "route": "Q2", "scope": "project"}]}))
        slow = AsyncClient(sock)
        slow.sync.timeout = 360  # the first model call imports litellm (seconds, more on CI)
        r = (await slow.run_job("consolidate", {"date": "2026-10-05"}))["result"]
        assert r["candidates_by"] == {"openai/fake": 1}
        mem = memory(home)
        assert "2026-10-05|generic|User indents with tabs, never spaces" in mem
        assert "flaky" not in mem
        sent = json.dumps(fake_llm.requests)
        assert "tabs" in sent and secret not in sent  # redacted before it was stored
        why = await c.request("GET", "/v1/memory/why/1")
        p = why["items"][0]["provenance"]
        assert p["made_by"] == "openai/fake" and p["prompt_version"] == "admission-llm-2"

        fake_llm.garbage_next()
        r = (await c.run_job("consolidate", {"date": "2026-10-06"}))["result"]
        assert r["candidates_by"] == {"extractive": 1}
        assert "ship-it" in memory(home)


async def test_context_scopes_project_entries_and_reads_daily_on_recent_time(tmp_path, src,
                                                                             sock):
    write_jsonl(src / "shelfie" / "s1.jsonl", msgs("s1", "2026-10-05", DAY1))
    write_jsonl(src / "kline" / "z1.jsonl", msgs("z1", "2026-10-05", ZH, hour=7))
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1) + len(ZH))
        await c.run_job("consolidate", {"date": "2026-10-05"})

        async def long_term(cwd: Path, query: str = "") -> tuple[str, dict[str, Any]]:
            cwd.mkdir(parents=True, exist_ok=True)
            r = await c.request("POST", "/v1/context", {"cwd": str(cwd), "query": query or None,
                                                        "budget_tokens": 4000})
            return "\n".join("；".join(i["items"]) for i in r["long_term"]), r

        here, _ = await long_term(tmp_path / "code" / "shelfie")
        assert "Jest" in here and "Conventional" in here and "先给结论" in here
        there, _ = await long_term(tmp_path / "code" / "kline")
        assert "Jest" not in there and "Conventional" in there
        _, r = await long_term(tmp_path / "code" / "kline", "what did we decide yesterday?")
        assert r["daily"] and r["daily"][0]["date"] == "2026-10-05"
        _, r = await long_term(tmp_path / "code" / "kline", "上周做了什么")
        assert r["daily"]
        _, r = await long_term(tmp_path / "code" / "kline", "adj_factor table")
        assert not r["daily"]


async def test_memoryctl_consolidation_verbs(tmp_path, src, sock, capsys):
    import asyncio

    from memoryd.cli.commands import main

    async def ctl(*args: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, ["--socket", str(sock), *args])
        cap = capsys.readouterr()
        return code, cap.out, cap.err

    write_jsonl(src / "shelfie" / "s1.jsonl", msgs("s1", "2026-03-02", DAY1))
    clock = SettableClock(dt.datetime(2026, 3, 2, 22, tzinfo=dt.UTC).timestamp())
    async with daemon(tmp_path, src, sock, clock) as (d, c):
        await ingested(c, len(DAY1))
        code, out, _ = await ctl("run", "consolidate", "--date", "2026-03-02", "--dry-run")
        assert code == 0 and "dry run: nothing written" in out and "added:" in out
        code, out, _ = await ctl("run", "consolidate", "--date", "2026-03-02")
        assert code == 0 and "consolidated 2026-03-02" in out and "Conventional" in out
        code, out, err = await ctl("run", "consolidate", "--date", "March")
        assert code == 2 and "date" in err
        code, out, _ = await ctl("memory", "why", "1")
        assert code == 0 and "made by extractive" in out and "shelfie/s1" in out
        code, out, _ = await ctl("daily")
        assert code == 0 and out.strip() == "2026-03-02"
        code, out, _ = await ctl("daily", "2026-03-02")
        assert code == 0 and "## Topics" in out
        code, out, _ = await ctl("sessions", "summarize", "shelfie/s1", "--to-memory")
        assert code == 0 and "MEMORY.md:" in out and "confirmed" in out
        clock.set(dt.datetime(2026, 10, 2, tzinfo=dt.UTC))
        code, out, _ = await ctl("run", "retention", "--dry-run")
        assert code == 0 and "1 sessions (7 units) archived" in out
        code, out, _ = await ctl("run", "retention")
        assert code == 0 and "-> 2026-03" in out
        code, out, _ = await ctl("archive", "list")
        assert code == 0 and "units-2026-03.jsonl.gz" in out
        code, out, _ = await ctl("search", "--archive", "conventional")
        assert code == 0 and "1 matches, showing 1" in out
        code, out, _ = await ctl("archive", "restore", "shelfie/s1")
        assert code == 0 and "7 restored" in out


@pytest.mark.slow
@pytest.mark.timeout(400)
async def test_ninety_days_bounded_memory_notes_history(tmp_path, src, sock):
    from memoryd.consolidate.scorer import similarity

    start = dt.date(2026, 6, 1)
    tools = ["ruff", "pnpm", "cargo", "helm", "bun", "nix", "make"]
    for i in range(90):
        day = (start + dt.timedelta(days=i)).isoformat()
        turns = [("user", f"The {tools[i % 7]} build looks off today, can you check?"),
                 ("assistant", "Checked: a stale cache; cleared it."),
                 ("user", "What is the tallest mountain in Africa?"),
                 ("user", "thanks")]
        if i % 3 == 0:
            turns.insert(1, ("user", f"Remember that job {i} deploys to region r{i} via "
                                     f"{tools[i % 7]}, always."))
        if i % 10 == 0:
            turns += ZH
        write_jsonl(src / f"p{i % 2}" / f"d{i}.jsonl", msgs(f"d{i}", day, turns))
    clock = SettableClock()
    home = tmp_path / "home"
    async with daemon(tmp_path, src, sock, clock, consolidate={"max_entries": 20}) as (d, c):
        await wait_for(lambda: _units(c, 90 * 4), timeout=120)
        for i in range(90):
            day = start + dt.timedelta(days=i)
            clock.set(dt.datetime.combine(day, dt.time(23), tzinfo=dt.UTC))
            await c.run_job("consolidate", {"date": day.isoformat()})
        clock.set(dt.datetime.combine(start + dt.timedelta(days=90), dt.time(12),
                                      tzinfo=dt.UTC))
        r = (await c.run_job("retention", {}))["result"]
        assert len(r["daily_notes"]["folded"]) == 90 - 30
        notes = sorted((home / "data" / "memory").glob("????-??-??.md"))
        assert len(notes) == 30
        for n in notes:
            text = n.read_text()
            items = [ln for ln in text.splitlines() if ln.startswith("- ")]
            assert len(items) == len(set(items))
            assert all(f"## {s}" in text for s in ("Topics", "Decisions", "Tool Activity",
                                                   "Open Questions"))
            assert "tallest mountain" not in text
        h = history(home)
        assert h.count("**2026-06-") == 30 and "demoted:" in h
        entries = [ln for ln in memory(home).splitlines() if ln[:4].isdigit()]
        assert 0 < len(entries) <= 20
        items = [ln.split("|", 2)[2] for ln in entries]
        assert all(similarity(a, b) < 0.8 for i, a in enumerate(items) for b in items[i + 1:])
        for n in range(1, len(entries) + 1):
            why = await c.request("GET", f"/v1/memory/why/{n}")
            assert why["items"][0]["provenance"] is not None
