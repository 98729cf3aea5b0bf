"""Forget reaches memory (issue 9): what only forgotten sessions stood behind leaves
MEMORY.md (its items), the daily notes (their lines) and HISTORY.md (moved items and
folded days' paragraphs); the user's own and edited lines never match, so they stay.
The files are edited first, each under its lock and re-read before write, and the
provenance rows deleted after: a crash in between finds the same rows next time."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from memoryd.memory import daily, history
from memoryd.consolidate import forget
from memoryd.memory import MemoryFile
from memoryd.store import Store
from memoryd.store import memories as sql

log = logging.getLogger(__name__)


async def prune(store: Store, memory: MemoryFile, memory_dir: Path) -> dict[str, Any]:
    """What only forgotten sessions stood behind (their provenance rows are orphans)
    leaves MEMORY.md, the daily notes and HISTORY.md; then the rows go."""
    rows = await store.read(sql.orphans)
    if not rows:
        return {"memory_items_removed": [], "daily_lines_removed": [],
                "history_lines_removed": []}
    items = {r["item_key"]: r["source"] for r in rows
             if r["made_by"] != sql.NOTE_MAKER and r["state"] == "active"}
    removed: list[str] = []
    if items:
        removed = await memory.rewrite("forget", lambda doc: forget.drop_items(doc, items))
    notes: dict[str, set[tuple[str, str]]] = {}
    for r in rows:
        if r["made_by"] == sql.NOTE_MAKER:
            notes.setdefault(r["scope"], set()).add((sql.note_item_of(r["item_key"]),
                                                      r["source"]))
    lines = await asyncio.to_thread(_drop_note_lines, memory_dir, notes)
    # HISTORY.md: items moved there, and folded days' paragraphs, that only the
    # forgotten sessions stood behind
    moved = {r["item_key"]: r["source"] for r in rows
             if r["made_by"] != sql.NOTE_MAKER and r["state"] != "active"}
    folded = {r["scope"]: [] for r in rows if r["made_by"] == sql.NOTE_MAKER}
    for r in rows:
        if r["made_by"] == sql.NOTE_MAKER:
            folded[r["scope"]].append(f"{r['item']} ({r['source']})")
    hist = await asyncio.to_thread(history.rewrite, memory_dir, lambda text: (
        forget.drop_history(text, moved, folded, set(items))))
    # the files first: a crash before this finds the same rows next time
    await store.write(lambda c: sql.delete_items(c, [r["id"] for r in rows]))
    if removed or lines or hist:
        log.info("forget: %d MEMORY.md items, %d daily-note lines and %d HISTORY.md "
                 "items removed", len(removed), len(lines), len(hist))
    return {"memory_items_removed": removed, "daily_lines_removed": lines,
            "history_lines_removed": hist}


def _drop_note_lines(memory_dir: Path, notes: dict[str, set[tuple[str, str]]]) -> list[str]:
    out: list[str] = []
    for day, gone in sorted(notes.items()):
        def plan(text: str | None, gone: set[tuple[str, str]] = gone
                 ) -> tuple[str | None, list[str]]:
            if text is None:  # folded into HISTORY.md already
                return None, []
            new, removed = forget.drop_note_lines(text, gone)
            return (new if removed else text), removed

        out += daily.edit_note(memory_dir, day, plan)
    return out
