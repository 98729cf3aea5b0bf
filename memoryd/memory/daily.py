"""Daily notes, `memory/YYYY-MM-DD.md`: the fixed sections `## Topics`, `## Decisions`,
`## Tool Activity`, `## Open Questions`, one `- item (agent · project)` line per item.

A later consolidation of the same day merges into the file as it is on disk: lines the
user wrote or edited stay verbatim, an item already there (same text, any case and
spacing) is not added again, and new items go to the end of their section.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memoryd.memory import locked
from memoryd.memory.locked import Edit, T, edit_locked
from memoryd.memory.document import item_key

SECTIONS = ("Topics", "Decisions", "Tool Activity", "Open Questions")
FROM_SUMMARY = {"topics": "Topics", "decisions": "Decisions", "tools": "Tool Activity",
                "questions": "Open Questions"}
NAME = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")
LOCK = ".notes.lock"  # one for every note (memoryd.memory.locked)
_TAG = re.compile(r"\s+\([^()]*·[^()]*\)\s*$")


@dataclass(frozen=True)
class NoteItem:
    section: str
    text: str
    agent: str
    project: str

    @property
    def tag(self) -> str:
        return f"{self.agent} · {self.project}"

    def line(self) -> str:
        return f"- {self.text} ({self.tag})"


def note_path(memory_dir: Path, day: str) -> Path:
    return memory_dir / f"{day}.md"


def line_key(line: str) -> str | None:
    s = line.strip()
    if not s.startswith(("- ", "* ")):
        return None
    return item_key(_TAG.sub("", s[2:]))


def merge(existing: str, day: str, items: Sequence[NoteItem]) -> tuple[str, list[NoteItem]]:
    """The new text and the items actually added."""
    lines = existing.split("\n") if existing else [f"# {day}", ""]
    if lines and lines[-1] == "":
        lines.pop()
    seen = {k for k in (line_key(x) for x in lines) if k}
    added: list[NoteItem] = []
    for sec in SECTIONS:
        new = []
        for it in items:
            if it.section != sec:
                continue
            k = item_key(it.text)
            if k in seen:
                continue
            seen.add(k)
            new.append(it)
        if not new and f"## {sec}" in lines:
            continue
        if f"## {sec}" not in lines:
            if lines and lines[-1].strip():
                lines.append("")
            lines.append(f"## {sec}")
            at = len(lines)
        else:
            start = lines.index(f"## {sec}") + 1
            at = start
            for i in range(start, len(lines)):
                if lines[i].startswith("#"):
                    break
                if lines[i].strip():
                    at = i + 1
        lines[at:at] = [it.line() for it in new]
        added += new
    # one blank line before each heading but the title
    out: list[str] = []
    for ln in lines:
        if ln.startswith("## ") and out and out[-1].strip():
            out.append("")
        out.append(ln)
    return "\n".join(out) + "\n", added


def write_note(memory_dir: Path, day: str, items: Sequence[NoteItem],
               dry_run: bool = False) -> list[NoteItem]:
    """Merge `items` into the day's note as it is on disk now, under the notes' lock (in
    a thread: file IO)."""
    if not items:
        return []

    def plan(existing: str | None) -> tuple[str | None, list[NoteItem]]:
        text, added = merge(existing or "", day, items)
        return (text if added and not dry_run else existing), added

    return edit_locked(note_path(memory_dir, day), lock_path(memory_dir), plan)


def lock_path(memory_dir: Path) -> Path:
    return memory_dir / LOCK


def edit_note(memory_dir: Path, day: str, edit: Edit[T], errors: str = "strict") -> T:
    """`edit` (memoryd.memory.locked) applied to the day's note under the lock."""
    return edit_locked(note_path(memory_dir, day), lock_path(memory_dir), edit, errors=errors)


def clean_temps(memory_dir: Path, timeout: float = locked.LOCK_TIMEOUT_S) -> list[str]:
    """The temp files killed note writes left (`.YYYY-MM-DD.md.*.tmp`), under the notes'
    lock (memoryd.memory.locked.clean_temps)."""
    return locked.clean_temps(lock_path(memory_dir), ".[0-9]*-[0-9]*-[0-9]*.md.*.tmp",
                              timeout)


def sections_of(text: str) -> Mapping[str, list[str]]:
    """The item lines of a note by section (for compaction and context)."""
    out: dict[str, list[str]] = {s: [] for s in SECTIONS}
    cur: str | None = None
    for ln in text.split("\n"):
        if ln.startswith("## "):
            cur = ln[3:].strip()
            out.setdefault(cur, [])
        elif cur is not None and ln.strip().startswith(("- ", "* ")):
            out[cur].append(ln.strip()[2:].strip())
    return out


def list_notes(memory_dir: Path) -> list[str]:
    try:
        return sorted(p.stem for p in memory_dir.iterdir() if NAME.match(p.name))
    except FileNotFoundError:
        return []
