"""What a day (or one session) offers consolidation: daily-note items from session
summaries and admission candidates from what the user said, built from rows the store
returned (pure functions)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.summarize import extractive
from memoryd.consolidate.admission import Candidate
from memoryd.memory.daily import FROM_SUMMARY, NoteItem
from memoryd.consolidate.findings import findings
from memoryd.consolidate.scorer import Scored, noise
from memoryd.consolidate.scorer import candidates as q1_sentences
from memoryd.consolidate.subjects import subjects

NOTE_ITEMS_PER_SECTION = 8


def project_name(project: str | None) -> str | None:
    if not project:
        return None
    return os.path.basename(project.rstrip("/")) or project


def note_items(session: Mapping[str, Any], units: Sequence[Mapping[str, Any]], *,
               whole_session: bool) -> tuple[list[NoteItem], list[str]]:
    """The day's note items for one session (and the noise left out): from its summary
    when the summary covers exactly this day's part, else an extractive summary of the
    day's units. Summaries, never copies of the transcript."""
    if whole_session and session.get("summary"):
        parts = extractive.parse(str(session["summary"]))
    else:
        parts = extractive.parse(extractive.summarize(list(units), max_words=400))
    agent, project = str(session["agent"]), project_name(session.get("project")) or "-"
    items: list[NoteItem] = []
    dropped: list[str] = []
    offered = [(section, text) for key, section in FROM_SUMMARY.items()
               for text in parts.get(key, [])[:NOTE_ITEMS_PER_SECTION]]
    found = [f for f in findings(units) if not noise(f[1])]  # what the work found out
    per: dict[str, int] = {}
    # a finding first: where the summary says the same, the finding knows its section
    for section, text in found + offered:
        text = " ".join(text.split()).strip(" ;；")
        if not text:
            continue
        if section != "Tool Activity" and noise(text):
            dropped.append(text)
            continue
        per[section] = per.get(section, 0) + 1
        if per[section] > NOTE_ITEMS_PER_SECTION * 2:
            continue
        items.append(NoteItem(section, text, agent, project))
    return items, dropped


def admission_candidates(session: Mapping[str, Any], units: Sequence[Mapping[str, Any]],
                         dropped: list[dict[str, str]] | None = None) -> list[Candidate]:
    """One candidate per user message holding Q1 sentences (the deterministic scorer);
    the sentences left out go to `dropped`, with why."""
    out: list[Candidate] = []
    for i, u in enumerate(units):
        if u.get("role") != "user" or u.get("kind") != "message":
            continue
        found = q1_sentences(str(u.get("content") or ""), dropped, ack=reply_to(units, i))
        if found:
            out.append(candidate(session, found, int(u["id"])))
    return out


def reply_to(units: Sequence[Mapping[str, Any]], i: int) -> str | None:
    """The assistant's next message after the user's message `units[i]`, before the
    user speaks again (tool calls and results in between are passed over)."""
    for u in units[i + 1:]:
        if u.get("kind") != "message":
            continue
        if u.get("role") == "user":
            return None
        if u.get("role") == "assistant":
            return str(u.get("content") or "")
    return None


def candidate(session: Mapping[str, Any], found: Sequence[Scored], unit_id: int) -> Candidate:
    """A candidate from a user message's scored sentences: user-wide when every one is
    about the user (first person), else the project's."""
    agent = str(session["agent"])
    project = project_name(session.get("project"))
    user_wide = project is None or all(f.user_wide for f in found)
    return Candidate(
        text=" ".join(f.text for f in found),
        importance=max(f.score for f in found),
        source=agent if user_wide else f"{agent}:{project}",
        scope=None if user_wide else project,
        session_pk=int(session["pk"]), unit_ids=[unit_id],
        reasons=sorted({r for f in found for r in f.reasons}),
        repeat=any(f.repeat for f in found), change=any(f.change for f in found),
        subject=next((s.name for f in found for s in subjects(f.text)), None))
