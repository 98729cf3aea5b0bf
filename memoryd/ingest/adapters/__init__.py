"""The agent adapters: `ADAPTERS` by agent name, `for_agent(name)`, and `detect` for a file.

Gemini CLI has two file shapes and so two adapter objects with the same `agent`: the
`.jsonl` log (the one in `ADAPTERS`) and the legacy whole-file `.json` document. A caller that
knows the agent name of a file asks `for_agent(name, path)` (or `detect(..., agents=(name,))`)
to get the object for that file's shape.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from memoryd.ingest.adapters import claude_code, codex, gemini_cli, generic, nanobot, openclaw, pi
from memoryd.ingest.adapters.base import Adapter

ADAPTERS: dict[str, Adapter] = {
    a.agent: a
    for a in (
        claude_code.ADAPTER,
        codex.ADAPTER,
        gemini_cli.ADAPTER,
        pi.ADAPTER,
        openclaw.ADAPTER,
        nanobot.ADAPTER,
        generic.ADAPTER,
    )
}
AGENTS: tuple[str, ...] = tuple(ADAPTERS)

# Every object `detect` may return, in the order first-line shapes are tried: distinctive
# shapes first, OpenClaw (location-bound) before pi, the bare role/content shape last.
_CANDIDATES: tuple[Adapter, ...] = (
    codex.ADAPTER,
    claude_code.ADAPTER,
    gemini_cli.DOCUMENT_ADAPTER,
    gemini_cli.ADAPTER,
    openclaw.ADAPTER,
    pi.ADAPTER,
    nanobot.ADAPTER,
    generic.ADAPTER,
)
# Default install locations (docs/formats.md): a file found there is tried as that agent first.
_LOCATION_HINTS: tuple[tuple[str, str], ...] = (
    ("/.claude/", "claude-code"),
    ("/claude/projects/", "claude-code"),
    ("/.codex/", "codex"),
    ("/.gemini/", "gemini-cli"),
    ("/.pi/", "pi"),
    ("/.openclaw/", "openclaw"),
    ("/.nanobot/", "nanobot"),
)
_SUFFIXES = frozenset({".jsonl", ".json"})

__all__ = ["ADAPTERS", "AGENTS", "Adapter", "detect", "for_agent"]


def for_agent(name: str, path: Path | None = None) -> Adapter:
    """The adapter for an agent name; ValueError naming the supported ones otherwise.

    With `path`, the variant for that file: Gemini's legacy `.json` document gets the
    whole-file adapter (the `.jsonl` log is the default one)."""
    try:
        adapter = ADAPTERS[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r}; supported: {', '.join(AGENTS)}") from None
    if path is not None and path.suffix == ".json":
        return next((a for a in _CANDIDATES if a.agent == name and a.whole_file), adapter)
    return adapter


def _hinted(path: Path) -> set[str]:
    where = path.as_posix()
    agents = {agent for marker, agent in _LOCATION_HINTS if marker in where}
    if pi.in_openclaw_sessions(path):
        agents.add("openclaw")
    return agents


def detect(
    path: Path, root: Path, first_line: bytes, *, agents: Collection[str] | None = None
) -> Adapter | None:
    """The adapter whose dialect this file is, or None (not a transcript we know).

    Adapters for the agent the location suggests (`~/.codex/...`, `agents/<id>/sessions/`)
    are asked first, then the rest; each still has to recognise the first line, so a file
    copied anywhere is found by its shape alone. `agents` limits the candidates.
    """
    if path.suffix not in _SUFFIXES:
        return None
    hinted = _hinted(path)
    candidates = [a for a in _CANDIDATES if agents is None or a.agent in agents]
    candidates.sort(key=lambda a: a.agent not in hinted)  # stable: hinted ones first
    for adapter in candidates:
        if adapter.claims(path, root, first_line):
            return adapter
    return None
