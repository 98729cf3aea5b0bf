"""The LLM boundary: the only module that imports litellm.

litellm is imported lazily, in a worker thread (the import takes seconds), with
`LITELLM_LOCAL_MODEL_COST_MAP=True` set first so it never fetches anything at import.
Every call goes through `LLM.complete`:

- the model comes from `MEMORYD_SUMMARY_MODEL` > `[llm] summary_model` > `[llm] model`;
  the key from the environment (the provider's usual variable, or `[llm] api_key_env`),
  never from the config file; `openai/` + `api_base` without a key gets a dummy one;
- a global concurrency limit, a timeout, and a hard daily token budget (UTC days) kept
  in SQLite, so a restart does not reset it: before sending, the call's estimated
  input plus its `max_tokens` must fit in what is left (less what calls in flight
  reserved), or nothing is sent. The pause after a fatal error lives in memory: a
  restart, or the `resume_llm` job, lifts it;
- usage and cost recorded per call (`llm_usage`), shown in status;
- errors mapped: transient (timeout, 429, 5xx, connection) -> `LLMTransientError`, for
  the job queue to retry later; fatal (auth, bad request, unknown model) -> LLM use is
  PAUSED with the reason, and `LLMUnavailableError` (callers go extractive); unusable
  output -> `LLMBadResponseError` (that job goes extractive).

litellm's own retries are off: our queue retries, with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from memoryd.config import LLMSettings
from memoryd.errors import MemorydError
from memoryd.log import tame_litellm
from memoryd.tokens import estimate_tokens

log = logging.getLogger(__name__)

DUMMY_KEY = "sk-memoryd-no-key"
# provider prefix -> the environment variable litellm reads its key from
PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "deepseek": "DEEPSEEK_API_KEY",
    "gemini": "GEMINI_API_KEY", "groq": "GROQ_API_KEY", "mistral": "MISTRAL_API_KEY",
    "openrouter": "OPENROUTER_API_KEY", "xai": "XAI_API_KEY", "together_ai": "TOGETHERAI_API_KEY",
    "cohere": "COHERE_API_KEY", "fireworks_ai": "FIREWORKS_AI_API_KEY",
}
HANDOVER_S = 0.25  # how long litellm's thread-to-loop hand-over may take, at most
KEYLESS = {"ollama", "ollama_chat", "lm_studio", "llamafile", "hosted_vllm", "vllm"}


class LLMError(MemorydError):
    status = 502
    code = "llm"


class LLMTransientError(LLMError):
    """Try again later (the queue retries with backoff)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMRateLimitedError(LLMTransientError):
    code = "llm_rate_limited"


class LLMUnavailableError(LLMError):
    """No LLM for now (none configured, no key, paused, budget spent): go extractive."""

    status = 503
    code = "llm_unavailable"


class LLMBudgetExceededError(LLMUnavailableError):
    code = "llm_budget_exceeded"


class LLMBadResponseError(LLMError):
    """The model answered, but not with something usable."""

    code = "llm_bad_response"


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    model: str
    input_tokens: int
    output_tokens: int
    cost: float


@dataclass(frozen=True)
class ModelChoice:
    model: str | None
    source: str | None  # where the model name came from
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    key_env: str | None = None  # the variable the key was (or should be) read from
    missing_key: str | None = None  # why there is no usable key

    @property
    def key_state(self) -> str:
        if self.missing_key:
            return "unset"
        if self.api_key == DUMMY_KEY:
            return "dummy"
        return "set" if self.api_key else "not needed"


def resolve_model(settings: LLMSettings, environ: Mapping[str, str]) -> ModelChoice:
    for source, value in (("MEMORYD_SUMMARY_MODEL", environ.get("MEMORYD_SUMMARY_MODEL")),
                          ("llm.summary_model", settings.summary_model),
                          ("llm.model", settings.model)):
        if value and value.strip():
            model = value.strip()
            break
    else:
        return ModelChoice(None, None)
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    base = settings.api_base or None
    env = settings.api_key_env or PROVIDER_KEYS.get(provider)
    key = environ.get(env) if env else None
    missing = None
    if not key:
        if settings.api_key_env:
            missing = f"${settings.api_key_env} is not set"
        elif provider in KEYLESS:
            pass
        elif provider in ("openai", "hosted_vllm") and base:
            key = DUMMY_KEY  # a local OpenAI-compatible server: the client insists on a key
        elif env:
            missing = f"${env} is not set"
    return ModelChoice(model, source, base, key, env, missing)


def _import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm
    import openai.resources  # noqa: F401 - imported by litellm's first call otherwise, on the loop

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm.drop_params = True
    litellm.turn_off_message_logging = True
    tame_litellm()  # its coloured stderr handler off, its DEBUG (prompts) never logged
    return litellm


async def _in_daemon_thread(fn: Callable[[], Any]) -> Any:
    """`fn()` in a daemon thread: unlike the default executor, the loop's shutdown does
    not wait for it (the litellm import takes seconds; a quick stop must not)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not fut.done():
            fut.set_exception(error) if error is not None else fut.set_result(result)

    def run() -> None:
        try:
            result, error = fn(), None
        except BaseException as e:
            result, error = None, e
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="memoryd-import-litellm", daemon=True).start()
    return await fut


def utc_day(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


class Ledger(Protocol):
    """Where the daily token budget is kept (`memoryd.store.usage.Usage`)."""

    async def on(self, day: str) -> dict[str, Any]: ...

    async def record(self, **row: Any) -> None: ...


class LLM:
    def __init__(self, settings: LLMSettings, ledger: Ledger, *,
                 environ: Mapping[str, str] = os.environ,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.ledger = ledger
        self.clock = clock
        self.choice = resolve_model(settings, environ)
        self.paused: str | None = None
        self.paused_at: float | None = None
        self._sem = asyncio.Semaphore(settings.concurrency)
        self._reserved = 0
        self._litellm: Any = None
        self._inflight: set[asyncio.Task[Any]] = set()
        self._import_lock = asyncio.Lock()

    @property
    def model(self) -> str | None:
        return self.choice.model

    def unavailable_reason(self) -> str | None:
        """Why no request would be sent now, apart from the budget (see `available`)."""
        if self.model is None:
            return "no model configured"
        if self.choice.missing_key:
            return f"no API key: {self.choice.missing_key}"
        if self.paused:
            return f"paused: {self.paused}"
        if self.settings.daily_token_budget == 0:
            return "daily_token_budget is 0"
        return None

    async def available(self) -> str | None:
        """None when a request could be sent now, else the reason."""
        reason = self.unavailable_reason()
        if reason is None and await self.budget_left() <= 0:
            reason = "daily token budget spent"
        return reason

    async def budget_left(self) -> int:
        used = await self.ledger.on(utc_day(self.clock()))
        return self.settings.daily_token_budget - used["tokens"] - self._reserved

    def resume(self) -> str | None:
        """Lift a pause (after the configuration or key was fixed outside)."""
        was, self.paused, self.paused_at = self.paused, None, None
        if was:
            log.info("LLM use resumed (was paused: %s)", was)
        return was

    async def warm_up(self) -> None:
        """Import litellm now, in a thread, so the first summary does not wait for it."""
        if self.model is not None:
            await self._module()

    async def _module(self) -> Any:
        if self._litellm is None:
            async with self._import_lock:
                if self._litellm is None:
                    t0 = time.monotonic()
                    self._litellm = await _in_daemon_thread(_import_litellm)
                    log.info("litellm imported in %.1fs", time.monotonic() - t0)
        return self._litellm

    async def complete(self, messages: list[dict[str, str]], *, purpose: str, target: str = "",
                       max_tokens: int = 600) -> Completion:
        reason = self.unavailable_reason()
        if reason:
            raise LLMUnavailableError(reason)
        estimate = sum(estimate_tokens(m["content"]) for m in messages) + max_tokens
        async with self._sem:
            if self.paused:  # paused while we waited for a slot
                raise LLMUnavailableError(f"paused: {self.paused}")
            left = await self.budget_left()
            if estimate > left:
                raise LLMBudgetExceededError(
                    f"daily token budget: {max(left, 0)} tokens left, this call needs ~{estimate}")
            self._reserved += estimate
            try:
                return await self._send(messages, purpose, target, max_tokens, estimate)
            finally:
                self._reserved -= estimate

    async def _send(self, messages: list[dict[str, str]], purpose: str, target: str,
                    max_tokens: int, estimate: int) -> Completion:
        litellm = await self._module()
        model, timeout = str(self.model), self.settings.timeout_s
        t0 = time.monotonic()

        async def call() -> Any:
            async with asyncio.timeout(timeout + 5):
                return await litellm.acompletion(
                    model=model, messages=messages, api_base=self.choice.api_base,
                    api_key=self.choice.api_key, timeout=timeout, max_tokens=max_tokens,
                    num_retries=0, max_retries=0)

        # litellm prepares a request in a worker thread, then awaits the coroutine that
        # thread hands back: a cancel during the hand-over drops that coroutine unawaited.
        # So a cancelled caller (shutdown) leaves the call to `close()`, which cancels it
        # once it is past the hand-over.
        task = asyncio.create_task(call())
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        task.add_done_callback(_settled)
        try:
            resp = await asyncio.shield(task)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            err = self._classify(e)
            # a timed-out request may still have been processed (and billed): count its input
            timed_out = isinstance(e, TimeoutError | litellm.exceptions.Timeout)
            charged = estimate - max_tokens if timed_out else 0
            await self._record(purpose, target, charged, 0, 0.0, type(err).__name__, err.message)
            log.warning("LLM %s call for %s failed after %.1fs: %s", purpose, target or "-",
                        time.monotonic() - t0, err.message)
            raise err from None
        usage = getattr(resp, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0) or estimate - max_tokens
        text = _content(resp)
        tout = int(getattr(usage, "completion_tokens", 0) or 0) or estimate_tokens(text or "")
        cost = _cost(litellm, resp)
        outcome = "ok" if text else "malformed"
        await self._record(purpose, target, tin, tout, cost, outcome, None)
        log.debug("LLM %s call for %s: %d+%d tokens in %.1fs", purpose, target or "-", tin, tout,
                  time.monotonic() - t0)
        if not text:
            raise LLMBadResponseError("the model returned no text")
        return Completion(text, model, tin, tout, cost)

    async def _record(self, purpose: str, target: str, tin: int, tout: int, cost: float,
                      outcome: str, error: str | None) -> None:
        now = self.clock()
        await self.ledger.record(
            ts=now, day=utc_day(now), model=str(self.model), purpose=purpose, target=target,
            input_tokens=tin, output_tokens=tout, cost=cost, outcome=outcome, error=error)

    def _classify(self, e: BaseException) -> LLMError:
        ex = self._litellm.exceptions
        status = getattr(e, "status_code", None)
        msg = self._scrub(f"{type(e).__name__}: {e}")[:500]
        if isinstance(e, TimeoutError | ex.Timeout):
            return LLMTransientError(f"timeout after {self.settings.timeout_s:g}s")
        if isinstance(e, ex.RateLimitError) or status == 429:
            return LLMRateLimitedError(f"rate limited: {msg}", retry_after=_retry_after(e))
        if isinstance(e, ex.ContextWindowExceededError | ex.ContentPolicyViolationError):
            return LLMBadResponseError(msg)  # this input only: that job goes extractive
        if isinstance(e, ex.AuthenticationError | ex.PermissionDeniedError | ex.NotFoundError
                      | ex.BadRequestError | ex.UnprocessableEntityError) \
                or status in (400, 401, 403, 404, 422):
            self._pause(msg)
            return LLMUnavailableError(f"paused: {msg}")
        if isinstance(e, ex.APIResponseValidationError):
            return LLMBadResponseError(msg)
        return LLMTransientError(msg)  # connection, 5xx, and anything unknown: retry later

    def _pause(self, reason: str) -> None:
        if not self.paused:
            log.error("LLM use paused until restart or `memoryctl run resume_llm`: %s", reason)
        self.paused, self.paused_at = reason, self.clock()

    def _scrub(self, text: str) -> str:
        key = self.choice.api_key
        return text.replace(key, "***") if key and key != DUMMY_KEY else text

    async def status(self) -> dict[str, Any]:
        now = self.clock()
        today = await self.ledger.on(utc_day(now))
        budget = self.settings.daily_token_budget
        reason = self.unavailable_reason()
        if reason is None and budget - today["tokens"] <= 0:
            reason = "daily token budget spent"
        return {
            "model": self.model,
            "in_use": self.model if reason is None else "extractive",
            "extractive_reason": reason,
            "model_source": self.choice.source,
            "api_base": self.choice.api_base,
            "api_key": self.choice.key_state,
            "paused": self.paused,
            "paused_at": self.paused_at,
            "budget": {"daily_tokens": budget, "used_today": today["tokens"],
                       "left_today": max(0, budget - today["tokens"])},
            "today": {"day": utc_day(now), "calls": today["calls"], "errors": today["errors"],
                      "input_tokens": today["input_tokens"],
                      "output_tokens": today["output_tokens"],
                      "cost_usd": round(today["cost"], 6)},
        }

    async def close(self) -> None:
        """Close litellm's cached HTTP clients and its logging worker (this loop's)."""
        litellm = self._litellm
        if litellm is None:
            return
        if self._inflight:
            await asyncio.sleep(HANDOVER_S)
            for t in list(self._inflight):
                t.cancel()
            if self._inflight:
                await asyncio.wait(set(self._inflight), timeout=0.5)
        try:
            from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

            async with asyncio.timeout(1.0):
                # let fire-and-forget success-logging tasks enqueue, then run them: a
                # coroutine dropped unawaited would warn at garbage collection
                for _ in range(3):
                    await asyncio.sleep(0)
                await GLOBAL_LOGGING_WORKER.flush()
                await GLOBAL_LOGGING_WORKER.stop()
                await litellm.close_litellm_async_clients()
        except Exception:
            log.debug("closing litellm's clients failed", exc_info=True)


def _settled(task: asyncio.Task[Any]) -> None:
    """Mark a finished call's outcome as seen (its caller may be gone)."""
    if not task.cancelled():
        task.exception()


def _content(resp: Any) -> str:
    try:
        text = resp.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return ""
    return text.strip() if isinstance(text, str) else ""


def _cost(litellm: Any, resp: Any) -> float:
    try:
        return float(litellm.completion_cost(completion_response=resp) or 0.0)
    except Exception:  # a model litellm has no price for
        return 0.0


def _retry_after(e: BaseException) -> float | None:
    headers = getattr(getattr(e, "response", None), "headers", None) or {}
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None
