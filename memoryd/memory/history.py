"""HISTORY.md: the grep-able archive beside MEMORY.md. Superseded and demoted entries
move here (one line each, with a pointer to what replaced them), and daily notes past
the retention window are folded in as one dated paragraph each. Appends are atomic
rewrites and idempotent: a line already present is not written twice. Every edit
re-reads the file under `.HISTORY.md.lock` (memoryd.memory.locked)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from memoryd.memory import locked
from memoryd.memory.locked import edit_locked

FILENAME = "HISTORY.md"
LOCK = f".{FILENAME}.lock"
HEADER = "# HISTORY\n\nSuperseded and demoted MEMORY.md entries, and past daily notes.\n\n"


def history_path(memory_dir: Path) -> Path:
    return memory_dir / FILENAME


def read(memory_dir: Path) -> str:
    try:
        return history_path(memory_dir).read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def lock_path(memory_dir: Path) -> Path:
    return memory_dir / LOCK


def clean_temps(memory_dir: Path) -> list[str]:
    """The temp files killed writes of HISTORY.md left, under its lock."""
    return locked.clean_temps(lock_path(memory_dir), f".{FILENAME}.*.tmp")


def append(memory_dir: Path, blocks: Sequence[str], dry_run: bool = False) -> list[str]:
    """Append each block (a line or a paragraph) not already in the file; returns those
    appended. Runs in a thread."""
    def plan(now: str | None) -> tuple[str | None, list[str]]:
        text = now or ""
        new = [b.strip("\n") for b in blocks if b.strip() and b.strip("\n") not in text]
        new = list(dict.fromkeys(new))
        if not new or dry_run:
            return now, new
        body = text or HEADER
        if not body.endswith("\n"):
            body += "\n"
        return body + "".join(f"{b}\n" for b in new), new

    if dry_run:
        return plan(read(memory_dir))[1]
    return edit_locked(history_path(memory_dir), lock_path(memory_dir), plan)


def rewrite(memory_dir: Path, edit: Callable[[str], tuple[str, list[str]]]) -> list[str]:
    """Apply `edit` (text -> new text, what it took out) to HISTORY.md and write it
    atomically when something changed; returns what was taken out. Runs in a thread."""
    def plan(text: str | None) -> tuple[str | None, list[str]]:
        if not text:
            return text, []
        new, removed = edit(text)
        return (new if removed else text), removed

    return edit_locked(history_path(memory_dir), lock_path(memory_dir), plan)


def superseded_line(day: str, entry_text: str, successor: str, why: str) -> str:
    return f"- {day} superseded: {entry_text.strip()} → replaced by: {successor} ({why})"


def demoted_line(day: str, entry_text: str, why: str) -> str:
    return f"- {day} demoted: {entry_text.strip()} ({why})"
