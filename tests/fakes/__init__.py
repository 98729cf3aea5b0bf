"""Test doubles that speak real protocols (a fake OpenAI-compatible server), and the
small builders the summary tests share: real transcripts written as generic JSONL,
read by the real ingestor into a real SQLite store."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from memoryd.config import Settings, load_settings
from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.redact import Redactor
from memoryd.daemon.store_index import open_store
from memoryd.store import Store
from memoryd.store.usage import Usage
from tests.fakes.llm_server import FakeLLM

__all__ = ["FakeLLM", "fake_llm", "settings_with", "Transcript", "summaries_service",
           "build_summaries", "start_summaries", "stop_summaries"]


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    fake = FakeLLM()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


def settings_with(fake: FakeLLM | None = None, *, llm: dict[str, Any] | None = None,
                  **summary: Any) -> Settings:
    """Settings for tests: the model `openai/fake` at the fake server (when given),
    fast retries, and `summary` overrides."""
    llm_section: dict[str, Any] = {"retry_backoff_s": 0.05, "retry_backoff_max_s": 0.2,
                                   "timeout_s": 2.0}
    if fake is not None:
        llm_section.update(model="openai/fake", api_base=fake.url)
    llm_section.update(llm or {})
    return load_settings(None, environ={}, overrides={"llm": llm_section, "summary": summary})


class Transcript:
    """A generic-format JSONL transcript under `root`, ingested on demand."""

    def __init__(self, root: Path, name: str = "proj/s1", start_ts: float = 1_700_000_000.0):
        self.root = root
        self.path = root / f"{name}.jsonl"
        self.session_id = name
        self.ts = start_ts
        self.n = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def _write(self, obj: dict[str, Any]) -> None:
        self.n += 1
        self.ts += 10
        obj.setdefault("timestamp", self.ts)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")

    def user(self, text: str) -> None:
        self._write({"role": "user", "content": text, "id": f"u{self.n}"})

    def assistant(self, text: str) -> None:
        self._write({"role": "assistant", "content": text, "id": f"a{self.n}"})

    def tool(self, name: str, args: dict[str, Any], output: str) -> None:
        cid = f"call{self.n}"
        self._write({"role": "assistant", "content": "", "id": f"t{self.n}", "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}]})
        self._write({"role": "tool", "tool_call_id": cid, "name": name, "content": output})

    def turns(self, n: int, *, user: Callable[[int], str] | None = None,
              reply: Callable[[int], str] | None = None) -> None:
        for i in range(n):
            self.user(user(i) if user else f"Question number {i} about the quokka parser?")
            self.assistant(reply(i) if reply else f"Answer {i}: the parser handles case {i}.")


class Ingest:
    def __init__(self, store: Store) -> None:
        self.ingestor = Ingestor(store, Redactor((), ("private",)), max_line_bytes=1 << 20)

    async def __call__(self, t: Transcript) -> int:
        return await self.ingestor.ingest_file(t.path, t.root, "generic")


async def summaries_idle(svc: Any) -> bool:
    """No trigger check under way or waiting, then no job pending or running. The
    triggers are asked first: asked after the counts, a check that enqueued its job
    while the counts were read would look settled before its job was counted."""
    if svc.triggers.pending():
        return False
    c = await svc.queue.counts()
    return c["pending"] == 0 and c["running"] == 0


def build_summaries(settings: Settings, store: Store, *, clock: Callable[[], float] | None = None,
                    environ: dict[str, str] | None = None,
                    busy: Callable[[], bool] | None = None) -> Any:
    """`Summaries` with an LLM, a job queue and a schedule of its own, built as the daemon
    builds them (memoryd.daemon)."""
    import time

    from memoryd.jobs.queue import JobQueue
    from memoryd.jobs.schedule import Schedule
    from memoryd.llm import LLM
    from memoryd.summarize.service import Summaries

    clock = clock or time.time
    llm = LLM(settings.llm, Usage(store), environ=environ or {}, clock=clock)
    queue = JobQueue.from_settings(store, settings, clock=clock, busy=busy)
    return Summaries(settings, store, llm, queue, Schedule(), clock=clock, busy=busy)


async def start_summaries(svc: Any) -> None:
    """In the daemon's order: the summaries (prompts, triggers), the queue, the schedule."""
    await svc.start()
    await svc.queue.start()
    await svc.schedule.start()


async def stop_summaries(svc: Any) -> None:
    """The reverse, as the daemon's exit stack: schedule, queue, summaries, LLM (once)."""
    if not svc.started:
        return
    await svc.schedule.stop()
    await svc.queue.stop()
    await svc.stop()
    await svc.llm.close()


@contextlib.asynccontextmanager
async def summaries_service(db: Path, settings: Settings, *, clock: Callable[[], float] | None
                            = None, environ: dict[str, str] | None = None
                            ) -> AsyncIterator[tuple[Any, Ingest]]:
    """A started `Summaries` over a store at `db`, subscribed to an ingestor."""
    store = await open_store(db)
    svc = build_summaries(settings, store, clock=clock, environ=environ)
    ingest = Ingest(store)
    ingest.ingestor.subscribers.append(svc.on_ingest)
    await start_summaries(svc)
    try:
        yield svc, ingest
    finally:
        await stop_summaries(svc)
        await store.close()
