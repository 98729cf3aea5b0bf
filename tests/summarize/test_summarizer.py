"""Session summaries and one-liners end to end: real transcripts through the real
ingestor into SQLite, the service's triggers and queue, litellm reaching the fake
OpenAI-compatible server; and the HTTP routes."""

from __future__ import annotations

import re

import pytest

from memoryd.http.services import Services
from memoryd.server.app import ROUTES, make_app
from memoryd.store.summaries import get_session, summary_history
from memoryd.summarize.summarizer import load_prompt, trim
from tests.fakes import (  # noqa: F401
    Transcript,
    fake_llm,
    settings_with,
    summaries_idle,
    summaries_service,
)
from tests.helpers import wait_for

LONG_OUTPUT = "\n".join(f"{i:>4}  const value{i} = compute({i});" for i in range(200))


async def settled(svc, timeout: float = 15.0) -> None:  # scaled by wait_for
    await wait_for(lambda: summaries_idle(svc), timeout=timeout)


async def session(svc, pk: int = 1) -> dict:
    return await svc.store.read(lambda c: get_session(c, pk))


async def units(svc, pk: int = 1) -> list[dict]:
    return await svc.store.read(lambda c: [dict(r) for r in c.execute(
        "SELECT id, seq, role, kind, one_liner, one_liner_by, one_liner_prompt, chars "
        "FROM units WHERE session_pk = ? ORDER BY seq", (pk,))])


def conversation(request: dict) -> str:
    text = request["messages"][1]["content"]
    return re.search(r"<conversation>\n(.*?)</conversation>", text, re.DOTALL).group(1)


def summary_requests(fake) -> list[dict]:
    return [r for r in fake.requests if "<conversation>" in r["messages"][1]["content"]]


async def test_summarizer_threshold_cuts_at_a_user_message(tmp_path, fake_llm):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.turns(20)  # seq 1..40
        t.user("Read the index file please.")  # 41
        t.tool("read_file", {"path": "src/index.ts"}, LONG_OUTPUT)  # 42, 43
        t.assistant("It computes 200 values.")  # 44
        for i in range(4):  # 45..60: four turns of a user message and three units
            t.user(f"Step {i}: run the tests?")
            t.tool("bash", {"command": "pytest -q"}, "5 passed")
            t.assistant(f"Step {i} passes.")
        await ingest(t)
        await settled(svc)
        s = await session(svc)
        # 60 units > 50: keep >= 10 recent, starting at a user message -> seq 49
        assert s["summary_upto"] == 48 and s["summary_by"] == "openai/fake"
        assert s["summary_prompt"] == "summary-1"
        conv = conversation(summary_requests(fake_llm)[0])
        assert conv.startswith("[1] user: Question number 0")
        assert "[48] assistant: Step 0 passes." in conv and "[49]" not in conv
        assert "[43] tool: read_file src/index.ts → 200 lines" in conv  # results abbreviated
        assert "[42]" not in conv  # the call is named by its result's line
        assert "compute(150)" not in conv
        recent = (await svc.get_summary("proj/s1"))["recent"]
        assert [r["seq"] for r in recent] == list(range(49, 61))
        assert recent[0]["role"] == "user"


async def test_summarizer_recursive_summary_folds_the_previous_one(tmp_path, fake_llm):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        fake_llm.replies.append("FIRST-SUMMARY: the quokka parser questions 0 to 20.")
        t = Transcript(tmp_path / "src")
        t.turns(26)
        await ingest(t)
        await settled(svc)
        first = await session(svc)
        assert first["summary"].startswith("FIRST-SUMMARY")
        t.turns(26, user=lambda i: f"Later question {i} about the wombat cache?")
        await ingest(t)
        await settled(svc)
        second = await session(svc)
        reqs = summary_requests(fake_llm)
        assert len(reqs) == 2
        prompt = reqs[1]["messages"][1]["content"]
        assert "<previous_summary>\nFIRST-SUMMARY: the quokka parser" in prompt
        assert conversation(reqs[1]).startswith(f"[{first['summary_upto'] + 1}] user:")
        assert second["summary_upto"] > first["summary_upto"]
        history = await svc.store.read(lambda c: summary_history(c, 1))
        assert [h["reason"] for h in history] == ["threshold", "threshold"]
        assert history[1]["from_seq"] == first["summary_upto"] + 1


async def test_summarizer_small_talk_is_filtered_and_long_messages_trimmed(tmp_path, fake_llm):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.user("Please explain the wombat cache design.")
        t.assistant("START " + "detail " * 2000 + "END-OF-REPLY")
        t.user("ok")
        t.assistant("👍")
        t.user("thanks")
        await ingest(t)
        r = await svc.summarize("proj/s1", wait=True)
        assert r["made_by"] == "openai/fake" and r["covers_upto_seq"] == 5
        conv = conversation(fake_llm.requests[0])
        assert "[3]" not in conv and "[4]" not in conv and "[5]" not in conv
        assert "START" in conv and "END-OF-REPLY" in conv and "chars omitted" in conv
        assert len(conv) < 2500


async def test_summarizer_nothing_worth_recording(tmp_path, fake_llm):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.user("hello there, how is your day going today")
        t.assistant("Fine, thank you for asking, and yours?")
        await ingest(t)
        fake_llm.replies.append("NOTHING_WORTH_RECORDING")
        r = await svc.summarize("proj/s1", wait=True)
        assert r["summary"] == "Nothing worth recording." and r["made_by"] == "openai/fake"


async def test_summarizer_without_a_model_is_extractive(tmp_path):
    settings = settings_with(None, one_liner_batch=1)
    async with summaries_service(tmp_path / "m.db", settings) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.user("Can you move the cache to Redis?")
        t.assistant("We decided to go with Redis 7. Should I also drop memcached?")
        t.tool("read_file", {"path": "src/index.ts"}, LONG_OUTPUT)
        t.turns(25)
        await ingest(t)
        await settled(svc)
        s = await session(svc)
        assert s["summary_by"] == "extractive" and s["summary_prompt"] == "extractive-1"
        assert "Decisions: We decided to go with Redis 7" in s["summary"]
        assert "Tool activity: read_file ×1" in s["summary"]
        lines = {u["seq"]: u for u in await units(svc)}
        assert lines[4]["one_liner"] == "read_file src/index.ts → 200 lines"
        assert lines[4]["one_liner_by"] == "extractive"
        assert lines[1]["one_liner"] is None  # short: its own summary
        st = await svc.status()
        assert st["llm"]["in_use"] == "extractive"
        assert st["llm"]["extractive_reason"] == "no model configured"


async def test_summarizer_upgrades_extractive_artifacts_when_a_model_appears(tmp_path, fake_llm):
    db = tmp_path / "m.db"
    t = Transcript(tmp_path / "src")
    t.user("Please summarize the build log.")
    t.tool("bash", {"command": "make all"}, LONG_OUTPUT)
    t.turns(30)
    async with summaries_service(db, settings_with(None, one_liner_batch=1)) as (svc, ingest):
        await ingest(t)
        await settled(svc)
        assert (await session(svc))["summary_by"] == "extractive"
        assert (await units(svc))[2]["one_liner_by"] == "extractive"
    async with summaries_service(db, settings_with(fake_llm)) as (svc, _):
        await wait_for(lambda: len(fake_llm.requests) >= 2, timeout=20)
        await settled(svc)
        s = await session(svc)
        assert s["summary_by"] == "openai/fake" and s["summary_prompt"] == "summary-1"
        u = {x["seq"]: x for x in await units(svc)}[3]
        assert u["one_liner"] == f"fake one-liner {u['id']}" and u["one_liner_by"] == "openai/fake"
        assert u["one_liner_prompt"] == "one-liner-1"
        # the search index follows the one-liner
        await svc.store.indexed()
        ix = svc.store.index
        hits = await svc.store.read(lambda c: ix.field_scores(["fake"], [u["id"], u["id"] - 1]))
        assert list(hits) == [u["id"]]
        history = await svc.store.read(lambda c: summary_history(c, 1))
        assert history[-1]["reason"] == "upgrade" and history[-1]["from_seq"] == 1
        st = await svc.status()
        assert st["summaries"]["summaries_by"] == {"openai/fake": 1}
        assert st["summaries"]["extractive_one_liners"] == 0


async def test_summarizer_one_liners_are_batched(tmp_path, fake_llm):
    # manual runs only: with triggers on, the ingest's full batch queues a one-liner job
    # of its own, and when that one has started, the manual job is a second one that finds
    # nothing left to do (units 0: seen once in a full run)
    settings = settings_with(fake_llm, one_liner_batch=5, enabled=False)
    async with summaries_service(tmp_path / "m.db", settings) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.user("Read all twelve files.")
        for i in range(12):
            t.tool("read_file", {"path": f"src/f{i}.py"}, LONG_OUTPUT)
        await ingest(t)
        r = await svc.run_one_liners({"session_id": "proj/s1"})
        assert r["result"]["units"] == 12 and r["result"]["made_by"] == {"openai/fake": 12}
        batch = [x for x in fake_llm.requests if "<items>" in x["messages"][1]["content"]]
        assert len(batch) == 3  # 5 + 5 + 2
        assert "### " in batch[0]["messages"][1]["content"]
        assert "JSON array" in batch[0]["messages"][0]["content"]


async def test_summarizer_malformed_output_falls_back_to_extractive(tmp_path, fake_llm):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.user("Check the build output for me.")
        t.tool("bash", {"command": "make"}, LONG_OUTPUT)
        await ingest(t)
        fake_llm.garbage_next(2)
        r = await svc.summarize("proj/s1", wait=True)
        assert r["made_by"] == "extractive"
        assert r["summary"].startswith("Topics: Check the build output for me")
        await settled(svc)
        u = (await units(svc))[2]
        assert u["one_liner"] == "bash make → 200 lines" and u["one_liner_by"] == "extractive"
        assert (await svc.status())["llm"]["paused"] is None


async def test_summarizer_chinese_conversation(tmp_path, fake_llm):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        t = Transcript(tmp_path / "src")
        t.user("我们需要把数据库迁移到 PostgreSQL，你觉得怎么样？")
        t.assistant("好的。我们决定采用 pg_dump 进行迁移，然后验证数据。")
        t.user("好的")
        await ingest(t)
        await svc.summarize("proj/s1", wait=True)
        prompt = fake_llm.requests[0]["messages"]
        assert "Chinese (中文)" in prompt[0]["content"] and "Chinese (中文)" in prompt[1]["content"]
    async with summaries_service(tmp_path / "x.db", settings_with(None)) as (svc, ingest):
        await ingest(t)
        r = await svc.summarize("proj/s1", wait=True)
        assert r["made_by"] == "extractive"
        assert r["summary"].splitlines() == ["要点：我们需要把数据库迁移到 PostgreSQL，你觉得怎么样？",
                                             "决定：我们决定采用 pg_dump 进行迁移，然后验证数据"]


def test_summarizer_prompts_are_versioned_package_data():
    p = load_prompt("summary")
    assert p.version == "summary-1" and "${conversation}" in p.user and "${language}" in p.system
    assert load_prompt("one_liners").version == "one-liner-1"
    assert trim("a" * 100 + "b" * 100, 50).startswith("a" * 35)


# -- HTTP -----------------------------------------------------------------------------------


@pytest.fixture
async def api(tmp_path, fake_llm, aiohttp_client):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        async def status():
            return await svc.status()

        app = make_app(Services(store=svc.store, status=status, version="test", jobs=svc.jobs,
                                summaries=svc))
        yield svc, ingest, await aiohttp_client(app)


async def test_summary_api(api, tmp_path):
    svc, ingest, client = api
    r = await client.get("/v1/sessions/nope/summary")
    assert r.status == 404 and (await r.json())["error"]["code"] == "not_found"
    t = Transcript(tmp_path / "src", name="deep/path/s9")
    t.user("Explain the quokka importer, please.")
    t.assistant("It streams rows in batches of 1000.")
    await ingest(t)
    r = await client.get("/v1/sessions/deep/path/s9/summary")
    body = await r.json()
    assert r.status == 200 and body["summary"] is None and body["covers_upto_seq"] == 0
    assert [(m["seq"], m["role"], m["kind"]) for m in body["recent"]] == [
        (1, "user", "message"), (2, "assistant", "message")]
    assert set(body["recent"][0]) >= {"seq", "role", "kind", "content", "ts", "tool_name"}
    r = await client.post("/v1/sessions/deep/path/s9/summarize?wait=true&agent=generic")
    body = await r.json()
    assert r.status == 200, body
    assert body["summary"].startswith("Summary: [1] user: Explain the quokka importer")
    assert body["covers_upto_seq"] == 2 and body["made_by"] == "openai/fake"
    assert body["prompt_version"] == "summary-1" and body["recent"] == []
    r = await client.post("/v1/sessions/deep/path/s9/summarize")
    assert r.status == 202 and (await r.json())["state"] == "pending"
    r = await client.get("/v1/sessions/deep/path/s9/summary?agent=codex")
    assert r.status == 404
    r = await client.get("/v1/sessions/deep/path/s9/summary?bogus=1")
    assert r.status == 400
    r = await client.post("/v1/jobs/summarize/run", json={"session_id": "deep/path/s9",
                                                           "wait": "true"})
    assert r.status == 200 and (await r.json())["result"]["state"] == "done"
    r = await client.get("/v1/status")
    assert (await r.json())["llm"]["model"] == "openai/fake"


def test_summary_routes_are_in_the_openapi_document():
    from memoryd.server import openapi

    paths = openapi.document(ROUTES, "test")["paths"]
    assert "get" in paths["/v1/sessions/{id}/summary"]
    assert "post" in paths["/v1/sessions/{id}/summarize"]


async def test_summarize_wait_times_out_with_a_504(tmp_path, fake_llm, aiohttp_client):
    async with summaries_service(tmp_path / "m.db", settings_with(fake_llm)) as (svc, ingest):
        app = make_app(Services(store=svc.store, status=svc.status, version="test",
                                summaries=svc))
        client = await aiohttp_client(app)
        t = Transcript(tmp_path / "src")
        t.turns(2)
        await ingest(t)
        fake_llm.delay_next(1.0)
        r = await client.post("/v1/sessions/proj/s1/summarize?wait=true&timeout=0.2")
        assert r.status == 504 and (await r.json())["error"]["code"] == "job_timeout"
        await settled(svc)
        assert (await session(svc))["summary_by"] == "openai/fake"
