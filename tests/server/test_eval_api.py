"""POST /v1/eval (memoryd.server.eval_api): the real app over a real store, its bad fields,
the refusal to send turns to a model off this machine, and model-written questions from
the fake OpenAI-compatible server."""

from __future__ import annotations

import pytest

from memoryd.config import LLMSettings
from memoryd.daemon.store_index import open_store
from memoryd.http.services import Services
from memoryd.llm import LLM
from memoryd.models import Record
from memoryd.recall.evaluate import Evaluator
from memoryd.server.app import make_app
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record
from memoryd.store.usage import Usage
from tests.fakes import fake_llm  # noqa: F401  (a fixture)

TURNS = [
    "Configure the quokka parser with strict tokenizer flags for nightly builds",
    "The wombat scheduler retries failed uploads using exponential backoff",
    "Please rename the platypus migration before merging into release branches",
]


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "m.db")

    def write(c):
        for i, text in enumerate(TURNS):
            pk = session_pk(c, "generic", f"s{i}", project="/p")
            store_record(c, pk, Record("user", text, ts=1.6e9 + i), f"s{i}:0", None, 0)

    await s.write(write)
    await s.indexed()
    yield s
    await s.close()


async def client_for(aiohttp_client, store, llm: LLM | None = None):
    async def status():
        return {}

    ev = Evaluator(store, store.index, llm, "the memoryd[embed] extra is not installed")
    return await aiohttp_client(make_app(Services(store=store, status=status, version="t",
                                                  evaluator=ev)))


@pytest.mark.parametrize("body, field", [
    ({"sample": 0}, "sample"), ({"sample": 2001}, "sample"), ({"seed": -1}, "seed"),
    ({"seed": "x"}, "seed"), ({"questions": "essay"}, "questions"),
    ({"dry_run": "maybe"}, "dry_run"), ({"show_misses": 500}, "show_misses"),
    ({"k": 5}, "k"),
])
async def test_bad_fields_are_400_naming_the_field(aiohttp_client, store, body, field):
    c = await client_for(aiohttp_client, store)
    r = await c.post("/v1/eval", json=body)
    assert r.status == 400
    assert (await r.json())["error"]["field"] == field


async def test_eval_over_http_and_the_dry_run(aiohttp_client, store):
    c = await client_for(aiohttp_client, store)
    r = await c.post("/v1/eval", json={})
    assert r.status == 200
    d = await r.json()
    assert (d["probes"], d["scores"][0]["r10"], d["missed"]) == (3, 1.0, 0)
    assert d["vectors"]["reason"] == "the memoryd[embed] extra is not installed"
    assert any("memoryd[embed]" in s and "91 MB" in s for s in d["suggestions"])
    dry = await (await c.post("/v1/eval", json={"dry_run": True})).json()
    assert dry["dry_run"] and dry["estimate_s"] is not None and dry["suggestions"] == []


async def test_model_questions_refused_for_a_model_off_this_machine(aiohttp_client, store,
                                                                    fake_llm):  # noqa: F811
    remote = LLM(LLMSettings(model="openai/gpt", api_base="https://llm.example.com/v1"),
                 Usage(store), environ={"OPENAI_API_KEY": "k"})
    c = await client_for(aiohttp_client, store, remote)
    r = await c.post("/v1/eval", json={"questions": "model"})
    assert r.status == 400
    err = (await r.json())["error"]
    assert err["field"] == "questions" and "nothing may leave this machine" in err["message"]
    assert "https://llm.example.com/v1" in err["message"]
    c2 = await client_for(aiohttp_client, store)  # no model at all
    assert (await c2.post("/v1/eval", json={"questions": "model"})).status == 400
    assert fake_llm.requests == []


async def test_model_questions_from_a_local_model(aiohttp_client, store, fake_llm):  # noqa: F811
    local = LLM(LLMSettings(model="openai/fake", api_base=fake_llm.url, timeout_s=5),
                Usage(store), environ={})
    # questions no turn answers (so each is listed as a miss); an empty answer makes no probe
    c = await client_for(aiohttp_client, store, local)
    fake_llm.replies.extend(["\"Where is the xylophone manual?\"\nmore", "",
                             "Which zeppelin hangar was chosen?"])
    try:
        d = await (await c.post("/v1/eval", json={"questions": "model",
                                                  "show_misses": 5})).json()
    finally:
        await local.close()
    assert len(fake_llm.requests) == 3 and d["questions"] == "model"
    prompts = fake_llm.prompts()
    assert all(any(t in p for t in TURNS) for p in prompts)  # each asks about one turn
    assert d["sampled"] == 3 and d["probes"] == 2
    assert {m["probe"] for m in d["misses"]} == {"Where is the xylophone manual?",
                                                 "Which zeppelin hangar was chosen?"}
    assert d["scores"][0]["r10"] == 0.0
    assert "Questions the local model wrote" in d["note"]


async def test_a_model_that_stops_answering_ends_the_run_with_what_it_asked(
        aiohttp_client, store, fake_llm):  # noqa: F811
    local = LLM(LLMSettings(model="openai/fake", api_base=fake_llm.url, timeout_s=5),
                Usage(store), environ={})
    c = await client_for(aiohttp_client, store, local)
    fake_llm.replies.extend(["Where is the xylophone manual?", {"status": 401}])
    try:
        d = await (await c.post("/v1/eval", json={"questions": "model"})).json()
        assert len(fake_llm.requests) == 2 and d["probes"] == 1
        assert d["suggestions"][0].startswith("The model stopped answering after 1 question (")
        # down from the first question: an error, not a report of nothing
        r = await c.post("/v1/eval", json={"questions": "model"})
        assert r.status >= 500 and "paused" in (await r.json())["error"]["message"]
    finally:
        await local.close()
