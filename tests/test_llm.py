"""The LLM boundary against a fake OpenAI-compatible server reached through litellm:
model and key resolution, usage and budget, error classes, lazy import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memoryd.config import LLMSettings
from memoryd.llm import (
    DUMMY_KEY,
    LLM,
    LLMBadResponseError,
    LLMBudgetExceededError,
    LLMRateLimitedError,
    LLMTransientError,
    LLMUnavailableError,
    resolve_model,
)
from memoryd.daemon.store_index import open_store
from memoryd.store import Store
from memoryd.store.usage import Usage
from tests.fakes import FakeLLM, fake_llm  # noqa: F401 - the fixture

MSGS = [{"role": "user", "content": "Summarize: the parser now handles quokkas."}]


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "m.db")
    yield s
    await s.close()


def llm_for(fake: FakeLLM, store: Store, **kw) -> LLM:
    settings = LLMSettings(model="openai/fake", api_base=fake.url, timeout_s=kw.pop("timeout", 2),
                           **kw)
    return LLM(settings, Usage(store), environ={})


def test_llm_model_resolution_order():
    s = LLMSettings(model="ollama/qwen2.5", summary_model="deepseek/deepseek-chat")
    assert resolve_model(s, {"MEMORYD_SUMMARY_MODEL": "anthropic/claude-x"}).model == \
        "anthropic/claude-x"
    assert resolve_model(s, {}).model == "deepseek/deepseek-chat"
    assert resolve_model(LLMSettings(model="ollama/qwen2.5"), {}).model == "ollama/qwen2.5"
    assert resolve_model(LLMSettings(), {}).model is None


def test_llm_keys_come_from_the_environment():
    c = resolve_model(LLMSettings(model="deepseek/deepseek-chat"), {"DEEPSEEK_API_KEY": "sk-1"})
    assert c.api_key == "sk-1" and c.missing_key is None and "sk-1" not in repr(c)
    c = resolve_model(LLMSettings(model="anthropic/claude-x"), {})
    assert c.missing_key == "$ANTHROPIC_API_KEY is not set"
    c = resolve_model(LLMSettings(model="anthropic/claude-x", api_key_env="MY_KEY"),
                      {"MY_KEY": "k", "ANTHROPIC_API_KEY": "other"})
    assert c.api_key == "k"
    # a local OpenAI-compatible server needs no key, but the client wants one
    c = resolve_model(LLMSettings(model="openai/qwen", api_base="http://127.0.0.1:1/v1"), {})
    assert c.api_key == DUMMY_KEY and c.missing_key is None
    assert resolve_model(LLMSettings(model="ollama/qwen2.5"), {}).key_state == "not needed"


async def test_llm_no_model_or_no_key_means_extractive_without_a_request(store):
    llm = LLM(LLMSettings(), Usage(store), environ={})
    assert await llm.available() == "no model configured"
    with pytest.raises(LLMUnavailableError):
        await llm.complete(MSGS, purpose="summary")
    llm = LLM(LLMSettings(model="anthropic/claude-x"), Usage(store), environ={})
    assert "ANTHROPIC_API_KEY" in await llm.available()
    assert (await llm.status())["in_use"] == "extractive"


async def test_llm_completion_records_usage(fake_llm, store):
    llm = llm_for(fake_llm, store)
    c = await llm.complete(MSGS, purpose="summary", target="session:1")
    assert c.text.startswith("Summary:") and c.model == "openai/fake"
    assert c.input_tokens > 0 and c.output_tokens > 0 and c.cost == 0.0
    req = fake_llm.requests[0]
    assert req["model"] == "fake" and req["messages"] == MSGS
    st = await llm.status()
    assert st["in_use"] == "openai/fake" and st["api_key"] == "dummy"
    assert st["today"]["calls"] == 1
    assert st["budget"]["used_today"] == c.input_tokens + c.output_tokens
    await llm.close()


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_llm_transient_http_errors(fake_llm, store, status):
    llm = llm_for(fake_llm, store)
    fake_llm.fail_next(status)
    with pytest.raises(LLMRateLimitedError if status == 429 else LLMTransientError):
        await llm.complete(MSGS, purpose="summary")
    assert llm.paused is None
    assert (await llm.complete(MSGS, purpose="summary")).text  # and it works again
    await llm.close()


async def test_llm_timeout_is_transient(fake_llm, store):
    llm = llm_for(fake_llm, store, timeout=0.3)
    fake_llm.delay_next(1.0)
    with pytest.raises(LLMTransientError, match="timeout"):
        await llm.complete(MSGS, purpose="summary")
    assert llm.paused is None
    await llm.close()


async def test_llm_connection_refused_is_transient(store):
    llm = LLM(LLMSettings(model="openai/fake", api_base="http://127.0.0.1:9/v1", timeout_s=2),
              Usage(store), environ={})
    with pytest.raises(LLMTransientError):
        await llm.complete(MSGS, purpose="summary")
    await llm.close()


@pytest.mark.parametrize("status", [401, 403, 400, 404])
async def test_llm_fatal_errors_pause_and_no_more_requests(fake_llm, store, status):
    llm = llm_for(fake_llm, store)
    fake_llm.fail_next(status)
    with pytest.raises(LLMUnavailableError):
        await llm.complete(MSGS, purpose="summary")
    assert llm.paused and str(status) in llm.paused
    with pytest.raises(LLMUnavailableError, match="paused"):
        await llm.complete(MSGS, purpose="summary")
    assert len(fake_llm.requests) == 1
    st = await llm.status()
    assert st["paused"] and st["in_use"] == "extractive" and st["today"]["errors"] == 1
    assert llm.resume()
    assert (await llm.complete(MSGS, purpose="summary")).text
    await llm.close()


async def test_llm_empty_answer_is_a_bad_response(fake_llm, store):
    llm = llm_for(fake_llm, store)
    fake_llm.replies.append("")
    with pytest.raises(LLMBadResponseError):
        await llm.complete(MSGS, purpose="summary")
    assert llm.paused is None
    await llm.close()


async def test_llm_daily_budget_is_hard_and_survives_restarts(fake_llm, store):
    llm = llm_for(fake_llm, store, daily_token_budget=1000)
    await llm.complete(MSGS, purpose="summary", max_tokens=100)
    big = [{"role": "user", "content": "word " * 2000}]  # ~2500 tokens: over what is left
    with pytest.raises(LLMBudgetExceededError):
        await llm.complete(big, purpose="summary")
    assert len(fake_llm.requests) == 1  # refused before sending
    # spend the rest, then nothing at all is sent, by this or a new instance
    while True:
        try:
            await llm.complete(MSGS, purpose="summary", max_tokens=100)
        except LLMBudgetExceededError:
            break
    sent = len(fake_llm.requests)
    again = llm_for(fake_llm, store, daily_token_budget=1000)
    with pytest.raises(LLMBudgetExceededError):
        await again.complete(MSGS, purpose="summary", max_tokens=100)
    assert len(fake_llm.requests) == sent
    st = await again.status()
    assert st["budget"]["used_today"] <= 1000
    await llm.close()


def test_llm_is_not_imported_by_the_service_or_memoryctl():
    code = ("import sys; import memoryd.summarize.service, memoryd.server.summaries_api, "
            "memoryd.summarize.triggers, memoryd.jobs.queue, memoryd.cli.commands; "
            "assert 'litellm' not in sys.modules, 'litellm imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
