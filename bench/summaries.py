"""Summaries benchmark: what the LLM is sent, how often, and how fast extractive is.

Over the recorded fixtures (tests/fixtures/sessions, every agent, read by
memoryd's own ingestor into a temp store) and a synthetic 2,000-message session
(bench/harness.py's generator), with the summaries service talking to the fake
OpenAI-compatible server (tests/fakes) through litellm:

- LLM input tokens ÷ transcript tokens (goal ≤ 1.3), counted on the requests the fake
  server received, with memoryd's token estimate on both sides: summaries and one-liners
  alone, and with admission (consolidation with the model, every day the corpus holds);
- LLM calls per 100 messages (summaries and one-liner batches);
- extractive throughput (messages/s): summaries in the summarizer's steps plus a
  one-liner per long unit, pure CPU.

The synthetic session is run twice: as a backfill (all lines at once, then idle) and
live (appended and ingested 10 lines at a time, triggers firing as they would).

    .venv/bin/python bench/summaries.py [--messages 2000] [--fixtures DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import harness as h  # noqa: E402
from memoryd.summarize import extractive
from memoryd.config import Settings, load_settings  # noqa: E402
from memoryd.consolidate.clock import local_day, zone  # noqa: E402
from memoryd.consolidate.service import Consolidator  # noqa: E402
from memoryd.ingest.ingestor import Ingestor  # noqa: E402
from memoryd.ingest.redact import Redactor  # noqa: E402
from memoryd.memory import MemoryFile  # noqa: E402
from memoryd.daemon.store_index import open_store  # noqa: E402
from memoryd.store import Store  # noqa: E402
from memoryd.summarize.service import Summaries  # noqa: E402
from tests.fakes import build_summaries, start_summaries, stop_summaries  # noqa: E402
from tests.fakes.llm_server import FakeLLM  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "sessions"
FAR_FUTURE = 4e9


def settings(fake: FakeLLM | None) -> Settings:
    llm: dict[str, Any] = {"daily_token_budget": 100_000_000, "concurrency": 4}
    if fake is not None:
        llm.update(model="openai/fake", api_base=fake.url)
    return load_settings(None, environ={}, overrides={"llm": llm, "summary": {"workers": 4}})


async def settle(svc: Summaries) -> None:
    while True:  # the triggers first: a check may enqueue while the counts are read
        if not svc.triggers.pending():
            c = await svc.queue.counts()
            if c["pending"] == 0 and c["running"] == 0:
                return
        await asyncio.sleep(0.005)


async def transcript_stats(store: Store) -> dict[str, int]:
    def q(c: Any) -> dict[str, int]:
        r = c.execute("SELECT count(*), coalesce(sum(tokens), 0), coalesce(sum(chars), 0) "
                      "FROM units").fetchone()
        return {"units": r[0], "tokens": r[1], "chars": r[2]}

    return await store.read(q)


def llm_figures(fake: FakeLLM, units: int, tokens: int) -> dict[str, Any]:
    summary = [r for r in fake.requests if "<conversation>" in r["messages"][1]["content"]]
    lines = [r for r in fake.requests if "<items>" in r["messages"][1]["content"]]
    admission = [r for r in fake.requests if "<user_messages>" in r["messages"][1]["content"]]
    sent = fake.input_tokens()
    adm = sum(h_tokens(r) for r in admission)
    return {"messages": units, "transcript_tokens": tokens, "llm_input_tokens": sent,
            "input_ratio": sent / tokens if tokens else float("nan"),
            "admission_tokens": adm,
            "summaries_ratio": (sent - adm) / tokens if tokens else float("nan"),
            "calls": len(fake.requests), "summary_calls": len(summary),
            "one_liner_calls": len(lines), "admission_calls": len(admission),
            "calls_per_100_messages": 100 * len(fake.requests) / units if units else 0.0}


def h_tokens(request: dict[str, Any]) -> int:
    from memoryd.tokens import estimate_tokens

    return estimate_tokens("\n".join(str(m.get("content", "")) for m in request["messages"]))


async def admit_every_day(store: Store, svc: Summaries, work: Path) -> int:
    """Consolidation with the model on every day the store holds, as memoryd would run
    it (a day's sessions, their summaries and the user's messages to the model): the
    LLM input admission adds. Returns the days consolidated."""
    tz = zone("UTC")
    days = await store.read(lambda c: sorted({local_day(r[0], tz) for r in c.execute(
        "SELECT ts FROM units WHERE ts IS NOT NULL")}))
    mem = work / f"memory-{id(svc)}"
    mem.mkdir()
    cons = Consolidator(settings(None), store, MemoryFile(mem / "MEMORY.md"), mem,
                        llm=svc.llm)
    for day in days:
        await cons.consolidate(day)
    return len(days)


async def run_fixtures(fixtures: Path, work: Path, fake: FakeLLM) -> dict[str, Any]:
    store = await open_store(work / "fixtures.db")
    ingestor = Ingestor(store, Redactor((), ("private",)), max_line_bytes=16 << 20)
    svc = build_summaries(settings(fake), store)
    ingestor.subscribers.append(svc.on_ingest)
    await start_summaries(svc)
    try:
        for agent_dir in sorted(p for p in fixtures.iterdir() if p.is_dir()):
            for f in sorted(agent_dir.rglob("*")):
                if f.is_file() and f.suffix in (".jsonl", ".json"):
                    await ingestor.ingest_file(f, agent_dir, agent_dir.name)
        await settle(svc)
        await svc.triggers.sweep_idle(now=FAR_FUTURE)  # every session's final summary
        await settle(svc)
        await admit_every_day(store, svc, work)
        stats = await transcript_stats(store)
        sessions = await store.read(lambda c: c.execute(
            "SELECT count(*), sum(summary IS NOT NULL) FROM sessions").fetchone())
        out = llm_figures(fake, stats["units"], stats["tokens"])
        out["sessions"], out["summarized"] = sessions[0], sessions[1]
        return out
    finally:
        await stop_summaries(svc)
        await store.close()


def synthetic_lines(n: int, seed: int = 7) -> list[dict[str, Any]]:
    gen = h.TextGen(seed=seed)
    return list(gen.lines(random.Random(seed), n, "syn"))


async def run_synthetic(lines: list[dict[str, Any]], work: Path, fake: FakeLLM | None, *,
                        batch: int | None, name: str) -> tuple[dict[str, Any], float]:
    root = work / name
    path = root / "proj" / "session.jsonl"
    path.parent.mkdir(parents=True)
    store = await open_store(work / f"{name}.db")
    ingestor = Ingestor(store, Redactor((), ("private",)), max_line_bytes=16 << 20)
    svc = build_summaries(settings(fake), store)
    ingestor.subscribers.append(svc.on_ingest)
    await start_summaries(svc)
    t0 = time.perf_counter()
    try:
        step = batch or len(lines)
        for i in range(0, len(lines), step):
            with open(path, "a", encoding="utf-8") as f:
                f.writelines(json.dumps(x, ensure_ascii=False) + "\n" for x in lines[i : i + step])
            await ingestor.ingest_file(path, root, "generic")
            if batch:
                await settle(svc)  # as if the next lines came later
        await settle(svc)
        await svc.triggers.sweep_idle(now=FAR_FUTURE)
        await settle(svc)
        if fake is not None:
            await admit_every_day(store, svc, work)
        elapsed = time.perf_counter() - t0
        stats = await transcript_stats(store)
        out = llm_figures(fake, stats["units"], stats["tokens"]) if fake else dict(stats)
        return out, elapsed
    finally:
        await stop_summaries(svc)
        await store.close()


async def extractive_throughput(work: Path, lines: list[dict[str, Any]]) -> dict[str, float]:
    """Pure CPU: the summarizer's steps over the synthetic session, each folded by the
    extractive summarizer, plus a one-liner per long unit."""
    store = await open_store(work / "extractive.db")
    root = work / "x"
    path = root / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    ingestor = Ingestor(store, Redactor((), ("private",)), max_line_bytes=16 << 20)
    await ingestor.ingest_file(path, root, "generic")
    svc = build_summaries(settings(None), store)
    await svc.summarizer.load_prompts()
    units = await svc.summarizer._units(1, 0, 10**9)
    await store.close()
    steps = svc.summarizer._steps(units)
    t0 = time.perf_counter()
    previous = None
    for step in steps:
        previous = extractive.summarize(step.units, previous)
    t_summary = time.perf_counter() - t0
    t0 = time.perf_counter()
    long_units = [u for u in units if u["chars"] >= 400]
    for u in long_units:
        extractive.one_liner(u, u.get("call"))
    t_lines = time.perf_counter() - t0
    return {"messages": len(units), "steps": len(steps),
            "summary_msgs_per_s": len(units) / t_summary,
            "one_liners": len(long_units), "one_liners_per_s": len(long_units) / t_lines,
            "total_msgs_per_s": len(units) / (t_summary + t_lines),
            "summary_words": extractive.words(previous or "")}


def row(name: str, r: dict[str, Any]) -> list[str]:
    return [name, str(r["messages"]), f"{r['transcript_tokens']:,}", f"{r['llm_input_tokens']:,}",
            f"{r['summaries_ratio']:.3f}", f"{r['input_ratio']:.3f}",
            str(r["summary_calls"]), str(r["one_liner_calls"]), str(r["admission_calls"]),
            f"{r['calls_per_100_messages']:.2f}"]


async def main_async(args: argparse.Namespace) -> int:
    print(h.machine())
    lines = synthetic_lines(args.messages)
    results: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="mdsum") as tmp:
        work = Path(tmp)
        if args.fixtures.is_dir():
            fake = FakeLLM()
            fake.summary_words = 180  # a realistic summary length to fold into the next call
            await fake.start()
            try:
                r = await run_fixtures(args.fixtures, work, fake)
            finally:
                await fake.close()
            print(f"fixtures: {r['sessions']} sessions, {r['summarized']} summarized")
            results.append(row("fixtures (all agents)", r))
        else:
            print(f"fixtures not found at {args.fixtures}: skipped")
        for name, batch in (("synthetic backfill", None), ("synthetic live (2/ingest)", 2)):
            fake = FakeLLM()
            fake.summary_words = 180
            await fake.start()
            try:
                r, elapsed = await run_synthetic(lines, work, fake, batch=batch,
                                                 name=name.split()[1])
            finally:
                await fake.close()
            results.append(row(name, r))
            print(f"{name}: {elapsed:.1f}s end to end")
        r, elapsed = await run_synthetic(lines, work, None, batch=None, name="extractive-e2e")
        print(f"extractive end to end (store, queue, no model): {r['units']} messages in "
              f"{elapsed:.2f}s = {r['units'] / elapsed:,.0f} messages/s")
        x = await extractive_throughput(work, lines)
    print()
    print(h.table(results, ["corpus", "messages", "transcript tok", "LLM input tok",
                            "summaries alone", "with admission (goal ≤1.3)",
                            "summary calls", "one-liner calls", "admission calls",
                            "calls/100 msgs"]))
    print()
    print(f"extractive summarizer: {x['messages']} messages in {x['steps']} steps: "
          f"{x['summary_msgs_per_s']:,.0f} messages/s (summaries), "
          f"{x['one_liners_per_s']:,.0f} one-liners/s over {x['one_liners']} long units, "
          f"{x['total_msgs_per_s']:,.0f} messages/s together; "
          f"final summary {x['summary_words']:.0f} words")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=2000)
    p.add_argument("--fixtures", type=Path, default=FIXTURES)
    args = p.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
