"""Session summaries and unit one-liners: what to summarize, the prompts, the LLM or
the extractive summarizer, and storing the result.

A session summary is recursive: each step folds the previous summary and the next
stretch of messages into one summary of at most `max_words` words, in the
conversation's language. A long stretch (a backfilled session) goes in several steps
of at most `max_input_chars` of conversation each, cut at user messages where
possible, and every step is stored as it completes: a retry or a restart continues
from there. What the LLM sees is lean: small talk dropped, long messages cut to head
and tail, tool calls and results as one line each.

One-liners: a tool call or result of at least `one_liner_min_chars`, or a message of
at least `one_liner_message_chars`, gets one line (many units per LLM call, answered
as a JSON array); a shorter unit is its own summary and keeps `one_liner` NULL
(readers fall back to the content).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

from memoryd.runtime import background
from memoryd.summarize import extractive
from memoryd.config import SummarySettings
from memoryd.llm import (
    LLM,
    LLMBadResponseError,
    LLMTransientError,
    LLMUnavailableError,
)
from memoryd.store import Store
from memoryd.store.summaries import (
    EXTRACTIVE,
    buffer_cut,
    calls_by_id,
    extractive_units,
    get_session,
    last_seq,
    save_one_liners,
    save_summary,
    set_one_liner_upto,
    units_between,
    units_for_one_liners,
)

log = logging.getLogger(__name__)

NOTHING = "NOTHING_WORTH_RECORDING"
ONE_LINER_SCAN = 200  # units per one-liner job (a job re-enqueues itself for more)
# of each unit's text in a one-liner request: a tool's output says more in its body; a
# message says what it is about at its start and end
ITEM_CHARS = {"tool_call": 1000, "tool_result": 1000}
ITEM_CHARS_MESSAGE = 600
LANGUAGE_NAMES = {
    "zh": "Chinese (中文), the language of the conversation",
    "ja": "Japanese (日本語), the language of the conversation",
    "ko": "Korean (한국어), the language of the conversation",
    "en": "the language of the conversation (English if unsure)",
}
Unit = dict[str, Any]


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    system: str
    user: str

    def render(self, **values: Any) -> list[dict[str, str]]:
        return [{"role": "system", "content": Template(self.system).safe_substitute(values)},
                {"role": "user", "content": Template(self.user).safe_substitute(values)}]


def load_prompt(name: str) -> Prompt:
    """`memoryd/summarize/prompts/<name>.md`: front matter with `version:`, then `## system` and
    `## user` sections (`${name}` placeholders)."""
    text = resources.files("memoryd.summarize").joinpath(f"prompts/{name}.md").read_text("utf-8")
    _, front, body = text.split("---\n", 2)
    version = re.search(r"^version:\s*(\S+)", front, re.MULTILINE)
    system, _, user = body.partition("## user\n")
    system = system.split("## system\n", 1)[1]
    return Prompt(name, version.group(1) if version else name, system.strip(), user.strip())


def trim_block(text: str, limit: int) -> str:
    """`text` with its line structure (blank runs collapsed), cut to head + tail."""
    text = re.sub(r"\n\s*\n+", "\n", text.strip())
    if len(text) <= limit:
        return text
    head, tail = int(limit * 0.7), int(limit * 0.25)
    return f"{text[:head]}\n… [{len(text) - head - tail} chars omitted] …\n{text[-tail:]}"


def trim(text: str, limit: int) -> str:
    """`text` on one line, cut to head + tail when longer than `limit`."""
    text = extractive.squash(text)
    if len(text) <= limit:
        return text
    head, tail = int(limit * 0.7), int(limit * 0.25)
    return f"{text[:head]} … [{len(text) - head - tail} chars omitted] … {text[-tail:]}"


@dataclass
class Step:
    """One LLM call's worth of a session: units (all covered) and the lines sent."""

    units: list[Unit]
    lines: list[str]
    size: int = 0


class Summarizer:
    def __init__(self, store: Store, llm: LLM, settings: SummarySettings, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.llm = llm
        self.settings = settings
        self.clock = clock
        self.prompts: dict[str, Prompt] = {}
        self._said: set[str] = set()  # why summaries were extractive, as logged at INFO

    async def load_prompts(self) -> None:
        self.prompts = await asyncio.to_thread(
            lambda: {n: load_prompt(n) for n in ("summary", "one_liners")})

    # -- session summaries ---------------------------------------------------------------

    async def summarize_session(self, pk: int, *, mode: str = "buffer", reason: str | None = None,
                                final_attempt: bool = False) -> dict[str, Any]:
        """mode "buffer": up to the cut that leaves `message_buffer_min` recent messages
        (threshold, interval); "all": everything (idle, manual)."""
        s = await self.store.read(lambda c: get_session(c, pk))
        if s is None:
            return {"skipped": "no such session"}
        upto = s["summary_upto"]
        if mode == "buffer":
            keep = self.settings.message_buffer_min
            cut = await self.store.read(lambda c: buffer_cut(c, pk, upto, keep))
            if cut is None:
                return {"skipped": "no user message to cut at", "upto": upto}
            end = cut - 1
        else:
            end = await self.store.read(lambda c: last_seq(c, pk))
        if end <= upto:
            return {"skipped": "nothing new", "upto": upto}
        units = await self._units(pk, upto, end)
        lang = self._language(units, s["summary"])
        previous, made_by = s["summary"], s["summary_by"]
        calls = 0
        steps = await self._plan(units)
        for i, step in enumerate(steps):
            step_end = end if i == len(steps) - 1 else step.units[-1]["seq"]
            text, made_by, version, used = await self._summarize_step(
                pk, step, previous, made_by, lang, allow_transient=not final_attempt)
            calls += used
            first = step.units[0]["seq"]
            now = self.clock()
            stored = await self.store.write(lambda c, t=text, m=made_by, v=version, e=step_end,
                                            f=first, u=upto: save_summary(
                c, pk, summary=t, from_seq=f, upto=e, made_by=m, prompt_version=v,
                reason=reason, now=now, expect_upto=u))
            if not stored:
                return {"skipped": "the summary changed meanwhile", "upto": upto}
            previous, upto = text, step_end
        log.debug("session %d summarized through seq %d by %s (%d LLM calls)", pk, end, made_by,
                 calls)
        return {"upto": end, "made_by": made_by, "llm_calls": calls, "language": lang}

    async def upgrade_session(self, pk: int) -> dict[str, Any]:
        """Redo an extractive summary and extractive one-liners with the model. Stops,
        keeping what is there, when the model is unavailable or answers badly."""
        s = await self.store.read(lambda c: get_session(c, pk))
        if s is None:
            return {"skipped": "no such session"}
        result: dict[str, Any] = {}
        if s["summary_by"] == EXTRACTIVE and s["summary_upto"] > 0:
            result["summary"] = await self._upgrade_summary(pk, s)
        result["one_liners"] = await self.one_liners(pk, upgrade=True)
        return result

    async def _upgrade_summary(self, pk: int, s: dict[str, Any]) -> str:
        upto = s["summary_upto"]
        units = await self._units(pk, 0, upto)
        lang = self._language(units, None)
        previous: str | None = None
        made_by, version = EXTRACTIVE, extractive.VERSION
        for step in await self._plan(units):
            if not step.lines:
                continue
            try:
                previous, made_by, version = await self._llm_summary(pk, step, previous, lang)
            except (LLMUnavailableError, LLMBadResponseError) as e:
                return f"kept extractive: {e.message}"
        if previous is None or made_by == EXTRACTIVE:
            return "nothing to send"
        now = self.clock()
        text, by, ver = previous, made_by, version
        stored = await self.store.write(lambda c: save_summary(
            c, pk, summary=text, from_seq=1, upto=upto, made_by=by, prompt_version=ver,
            reason="upgrade", now=now, expect_upto=upto))
        return f"upgraded by {by}" if stored else "the summary changed meanwhile"

    async def _units(self, pk: int, after: int, upto: int) -> list[Unit]:
        """The units of (after, upto], each tool result with its call (`call`)."""
        def read(c: Any) -> list[Unit]:
            units = units_between(c, pk, after, upto)
            calls = {u["related_id"]: u for u in units
                     if u["kind"] == "tool_call" and u["related_id"]}
            missing = [u["related_id"] for u in units if u["kind"] == "tool_result"
                       and u["related_id"] and u["related_id"] not in calls]
            if missing:
                calls.update(calls_by_id(c, pk, missing))
            for u in units:
                if u["kind"] == "tool_result":
                    u["call"] = calls.get(u["related_id"])
            return units

        return await self.store.read(read)

    @staticmethod
    def _language(units: list[Unit], previous: str | None) -> str:
        texts = [u["content"] for u in units if u["kind"] == "message"]
        return extractive.language([*texts, previous or ""])

    def _line(self, u: Unit, answered: set[str]) -> str | None:
        """How a unit reaches the LLM: one line, or None when it is left out."""
        kind, seq = u["kind"], u["seq"]
        if kind == "message":
            if extractive.is_small_talk(u["content"]):
                return None
            return f"[{seq}] {u['role']}: {trim(u['content'], self.settings.message_max_chars)}"
        if kind == "tool_result":
            line = u["one_liner"] if u["one_liner"] and u["one_liner_by"] != EXTRACTIVE \
                else extractive.one_liner(u, u.get("call"))
            return f"[{seq}] tool: {line}"
        if kind == "tool_call":
            if u["related_id"] in answered:
                return None  # its result's line names the call
            return f"[{seq}] tool call: {extractive.one_liner(u)}"
        if kind == "compaction":
            return f"[{seq}] earlier context, as the agent summarized it: " \
                   f"{trim(u['content'], self.settings.message_max_chars)}"
        return None

    async def _plan(self, units: list[Unit]) -> list[Step]:
        return await background.run(lambda: self._steps(units)) if len(units) > 50 \
            else self._steps(units)

    def _steps(self, units: list[Unit]) -> list[Step]:
        """Split into steps of at most `max_input_chars` of lines, at user messages
        where possible (a single longer turn is split between its units)."""
        answered = {u["related_id"] for u in units
                    if u["kind"] == "tool_result" and u["related_id"]}
        turns: list[Step] = []
        for u in units:
            if not turns or (u["role"] == "user" and u["kind"] == "message"):
                turns.append(Step([], []))
            line = self._line(u, answered)
            turns[-1].units.append(u)
            if line:
                turns[-1].lines.append(line)
                turns[-1].size += len(line) + 1
        limit = self.settings.max_input_chars
        steps: list[Step] = []
        for turn in turns:
            if steps and steps[-1].size + turn.size <= limit:
                cur = steps[-1]
                cur.units += turn.units
                cur.lines += turn.lines
                cur.size += turn.size
                continue
            if turn.size <= limit:
                steps.append(turn)
                continue
            cur = Step([], [])
            steps.append(cur)
            for u in turn.units:
                line = self._line(u, answered)
                n = len(line) + 1 if line else 0
                if cur.size + n > limit and cur.lines:
                    cur = Step([], [])
                    steps.append(cur)
                cur.units.append(u)
                if line:
                    cur.lines.append(line)
                    cur.size += n
        return steps

    async def _summarize_step(self, pk: int, step: Step, previous: str | None,
                              previous_by: str | None, lang: str, *,
                              allow_transient: bool) -> tuple[str, str, str, int]:
        """(summary, made by, prompt version, LLM calls) of one step."""
        if not step.lines:  # only small talk and bookkeeping: nothing to add
            nothing = extractive.LABELS[lang]["nothing"]
            return previous or nothing, previous_by or EXTRACTIVE, extractive.VERSION, 0
        try:
            text, model, version = await self._llm_summary(pk, step, previous, lang)
            return text, model, version, 1
        except (LLMUnavailableError, LLMBadResponseError) as e:
            # once per reason at INFO (a session's every step gave the same line)
            level = logging.DEBUG if e.message in self._said else logging.INFO
            if len(self._said) < 64:
                self._said.add(e.message)
            log.log(level, "session %d: extractive summary (%s)", pk, e.message)
        except LLMTransientError as e:
            if allow_transient:
                raise
            log.warning("session %d: extractive summary after repeated failures (%s)", pk,
                        e.message)
        text = await background.run(lambda: extractive.summarize(
            step.units, previous, max_words=self.settings.max_words, lang=lang))
        return text, EXTRACTIVE, extractive.VERSION, 0

    async def _llm_summary(self, pk: int, step: Step, previous: str | None,
                           lang: str) -> tuple[str, str, str]:
        prompt = self.prompts["summary"]
        messages = prompt.render(max_words=self.settings.max_words, language=LANGUAGE_NAMES[lang],
                                 previous=previous or "(none)", conversation="\n".join(step.lines))
        c = await self.llm.complete(messages, purpose="summary", target=f"session:{pk}",
                                    max_tokens=max(300, self.settings.max_words * 3))
        return self._clean_summary(c.text, previous, lang), c.model, prompt.version

    def _clean_summary(self, text: str, previous: str | None, lang: str) -> str:
        text = re.sub(r"^```\w*\n?|\n?```$", "", text.strip()).strip()
        if NOTHING in text.upper().replace(" ", "_") and len(text) < len(NOTHING) + 20:
            return previous or extractive.LABELS[lang]["nothing"]
        if not extractive.has_words(text):
            raise LLMBadResponseError("the summary has no words")
        limit = self.settings.max_words * 1.5
        if extractive.words(text) > limit:  # a model that ignores the limit: keep the start
            kept: list[str] = []
            for s in extractive.sentences(text):
                if extractive.words(" ".join([*kept, s])) > limit:
                    break
                kept.append(s)
            text = " ".join(kept) or extractive.clip(text, int(limit * 6))
        return text

    # -- one-liners ----------------------------------------------------------------------

    async def one_liners(self, pk: int, *, upgrade: bool = False,
                         final_attempt: bool = False) -> dict[str, Any]:
        """One-liners for the session's new long units (or, with `upgrade`, redo its
        extractive ones with the model). Returns counts and whether more are left."""
        def read(c: Any) -> tuple[list[Unit], int, dict[str, dict[str, Any]]]:
            if upgrade:
                units, reached = extractive_units(c, pk, ONE_LINER_SCAN), 0
            else:
                s = get_session(c, pk)
                if s is None:
                    return [], 0, {}
                units, reached = units_for_one_liners(
                    c, pk, s["one_liner_upto"], self.settings.one_liner_min_chars,
                    self.settings.one_liner_message_chars, ONE_LINER_SCAN)
            ids = [u["related_id"] for u in units if u["kind"] == "tool_result" and u["related_id"]]
            return units, reached, calls_by_id(c, pk, ids) if ids else {}

        units, reached, calls = await self.store.read(read)
        for u in units:
            u["call"] = calls.get(u["related_id"]) if u["kind"] == "tool_result" else None
        made: dict[str, int] = {}
        for batch in self._batches(units):
            lines = await self._one_liner_batch(pk, batch, upgrade=upgrade,
                                                allow_transient=not final_attempt)
            if not lines:
                break  # upgrade without a usable model: keep the extractive lines
            await self.store.write(lambda c, items=lines: save_one_liners(
                c, items, only_if_by=EXTRACTIVE if upgrade else None))
            for _, _, by, _ in lines:
                made[by] = made.get(by, 0) + 1
        if not upgrade and reached:
            await self.store.write(lambda c: set_one_liner_upto(c, pk, reached))
        return {"units": sum(made.values()), "made_by": made,
                "more": len(units) == ONE_LINER_SCAN}

    def _batches(self, units: list[Unit]) -> list[list[Unit]]:
        out: list[list[Unit]] = []
        size = 0
        for u in units:
            n = min(len(u["content"]), _item_chars(u)) + 80
            if not out or len(out[-1]) >= self.settings.one_liner_batch \
                    or size + n > self.settings.max_input_chars:
                out.append([])
                size = 0
            out[-1].append(u)
            size += n
        return out

    async def _one_liner_batch(self, pk: int, batch: list[Unit], *, upgrade: bool,
                               allow_transient: bool) -> list[tuple[int, str, str, str]]:
        def fallback() -> list[tuple[int, str, str, str]]:
            return [] if upgrade else [(u["id"], extractive.one_liner(u, u.get("call")), EXTRACTIVE,
                                        extractive.VERSION) for u in batch]

        prompt = self.prompts["one_liners"]
        items = "\n".join(f"### {u['id']} | {self._describe(u)}\n"
                          f"{trim_block(u['content'], _item_chars(u))}" for u in batch)
        lang = extractive.language(u["content"] for u in batch)
        try:
            c = await self.llm.complete(prompt.render(language=LANGUAGE_NAMES[lang], items=items),
                                        purpose="one_liners", target=f"session:{pk}",
                                        max_tokens=60 * len(batch) + 60)
            answers = parse_one_liners(c.text)
        except (LLMUnavailableError, LLMBadResponseError) as e:
            log.info("session %d: extractive one-liners (%s)", pk, e.message)
            return await background.run(fallback)
        except LLMTransientError as e:
            if allow_transient:
                raise
            log.warning("session %d: extractive one-liners after repeated failures (%s)", pk,
                        e.message)
            return await background.run(fallback)
        out = []
        for u in batch:
            line = answers.get(u["id"])
            if line:
                out.append((u["id"], line, c.model, prompt.version))
            elif not upgrade:
                out.append((u["id"], extractive.one_liner(u, u.get("call")), EXTRACTIVE,
                            extractive.VERSION))
        return out

    @staticmethod
    def _describe(u: Unit) -> str:
        if u["kind"] in ("tool_call", "tool_result"):
            call = u.get("call") or u
            name = u["tool_name"] or call.get("tool_name") or "tool"
            return f"{u['kind']} {name} {extractive.key_argument(call.get('tool_args'))}".strip()
        return f"{u['role']} {u['kind']}"


def parse_one_liners(text: str) -> dict[int, str]:
    """The model's JSON array `[{"id", "summary"}]` (fences and chatter around it
    tolerated) as {unit id: line}; LLMBadResponseError when there is none."""
    start, end = text.find("["), text.rfind("]")
    if start == -1 or end <= start:
        raise LLMBadResponseError("no JSON array in the one-liner answer")
    try:
        data = json.loads(text[start : end + 1])
    except ValueError as e:
        raise LLMBadResponseError(f"malformed JSON in the one-liner answer: {e}") from None
    out: dict[int, str] = {}
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, Mapping):
            continue
        uid, line = item.get("id"), item.get("summary")
        if isinstance(uid, str) and uid.strip().isdigit():
            uid = int(uid)
        if isinstance(uid, int) and isinstance(line, str) and extractive.squash(line):
            out[uid] = extractive.clip(line, 240)
    if not out:
        raise LLMBadResponseError("the one-liner answer names no item")
    return out


def _item_chars(u: Unit) -> int:
    return ITEM_CHARS.get(u["kind"], ITEM_CHARS_MESSAGE)

