"""Admission with a model: the day's requests of one session and its summary go to the
LLM (through `memoryd/llm.py`, the only litellm importer), which answers with JSON
validated by pydantic. Anything else (malformed JSON, a wrong shape, an LLM error) is
None here, and the caller falls back to the deterministic scorer for that session."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memoryd.consolidate.admission import Candidate
from memoryd.consolidate.candidates import project_name
from memoryd.consolidate.scorer import Q1_MIN, SECRET, clean_item
from memoryd.consolidate.subjects import subjects

if TYPE_CHECKING:
    from memoryd.llm import LLM

log = logging.getLogger(__name__)

PROMPT_VERSION = "admission-llm-2"
MAX_INPUT_CHARS = 12_000
SYSTEM = """You decide what an AI coding agent must remember about its user long-term.
Read the user's messages of one session (and its summary). Return ONLY a JSON object:
{"items": [{"text": "...", "subject": "...", "route": "Q1"|"Q2"|"Q3",
"scope": "user"|"project", "importance": 1-10, "supersedes_previous": true|false,
"reason": "..."}]}
Q1: the agent would act wrongly without it: stable preferences, explicit "remember"/"from
now on" requests, corrections the user repeats, long-running project facts and goals,
environment constraints. Q2: useful to look up later but not standing (decisions of the
day, debugging results, incidents, open questions). Q3: small talk, general knowledge,
one-off output. Write each item as one short normalised statement in the user's
language, without conversational framing ("Uses bun as the package manager", not
"Actually, from now on we use bun"; "项目数据库迁移使用 flyway"). subject: the few words
the statement is about ("package manager", "test runner", "deploy target", "minimum iOS
version", "数据库迁移工具"), the same words for every statement about the same thing; ""
when none. One item per subject: when the user changed their mind within the session,
give only the final statement. scope "user" for the user's own habits, "project" for
this project's facts. supersedes_previous: true when the item replaces an earlier rule
or fact. Return {"items": []} when nothing is worth recording."""


class ModelItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=3, max_length=400)
    subject: str = Field("", max_length=80)
    route: Literal["Q1", "Q2", "Q3"]
    scope: Literal["user", "project"] = "project"
    importance: int = Field(5, ge=1, le=10)
    supersedes_previous: bool = False
    reason: str = Field("", max_length=400)


class ModelOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    items: list[ModelItem] = Field(default_factory=list, max_length=50)


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def parse(text: str) -> ModelOutput | None:
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return ModelOutput.model_validate(json.loads(body[start:end + 1]))
    except (ValueError, ValidationError):
        return None


def render(session: Mapping[str, Any], units: Sequence[Mapping[str, Any]]) -> str:
    said = [str(u.get("content") or "").strip() for u in units
            if u.get("role") == "user" and u.get("kind") == "message"]
    text = "\n".join(f"- {s}" for s in said if s)
    if len(text) > MAX_INPUT_CHARS:
        text = text[-MAX_INPUT_CHARS:]
    summary = str(session.get("summary") or "").strip()
    project = project_name(session.get("project")) or "-"
    return (f"Agent: {session['agent']}\nProject: {project}\n"
            + (f"<summary>\n{summary}\n</summary>\n" if summary else "")
            + f"<user_messages>\n{text}\n</user_messages>")


def _subject(it: ModelItem) -> str:
    """The model's subject, normalised; a known subject read from the text itself wins
    over whatever the model called it (consolidate.subjects)."""
    known = subjects(it.text)
    if known:
        return known[0].name
    return " ".join(it.subject.casefold().split())


async def model_candidates(llm: LLM, session: Mapping[str, Any],
                           units: Sequence[Mapping[str, Any]],
                           dropped: list[dict[str, str]] | None = None
                           ) -> list[Candidate] | None:
    """Q1 candidates from the model, or None (no usable answer: use the scorer). The
    items it routed elsewhere go to `dropped`, with its reason."""
    from memoryd.llm import LLMError

    user_units = [u for u in units if u.get("role") == "user" and u.get("kind") == "message"]
    if not user_units:
        return []
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": render(session, units)}]
    try:
        done = await llm.complete(messages, purpose="admission",
                                  target=f"session:{session['pk']}", max_tokens=800)
    except LLMError as e:
        log.info("admission: model unavailable for session %s (%s); extractive",
                 session["pk"], e.message)
        return None
    out = parse(done.text)
    if out is None:
        log.warning("admission: malformed model output for session %s; extractive",
                    session["pk"])
        return None
    agent, project = str(session["agent"]), project_name(session.get("project"))
    ids = [int(u["id"]) for u in user_units]
    cands = []
    left: list[dict[str, str]] = []
    # a model that contradicts itself (two Q1 statements about one subject): the later
    # one stands, as the user's later word would
    last = {_subject(it): i for i, it in enumerate(out.items)
            if it.route == "Q1" and _subject(it)}
    for i, it in enumerate(out.items):
        if it.route == "Q1" and _subject(it) and last[_subject(it)] != i:
            left.append({"item": clean_item(it.text), "reason": "superseded",
                         "why": f"the model's own later item about {it.subject.strip()} "
                                "replaces it"})
            continue
        if SECRET.search(it.text):
            left.append({"item": clean_item(it.text), "reason": "secret",
                         "why": "holds a redacted secret: never written to memory"})
            continue
        if it.route != "Q1":
            left.append({"item": clean_item(it.text), "reason": "below threshold",
                         "why": f"routed {it.route} by the model"
                                + (f": {it.reason}" if it.reason else "")})
            continue
        user_wide = it.scope == "user" or project is None
        cands.append(Candidate(
            text=clean_item(it.text), importance=max(it.importance, Q1_MIN),
            source=agent if user_wide else f"{agent}:{project}",
            scope=None if user_wide else project, session_pk=int(session["pk"]),
            unit_ids=ids, reasons=[it.reason] if it.reason else ["model: Q1"],
            change=it.supersedes_previous, made_by=done.model, prompt_version=PROMPT_VERSION,
            subject=_subject(it) or None))
    if dropped is not None:
        dropped += left
    return cands
