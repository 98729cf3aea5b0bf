"""Which directories memoryd reads, and which files in them are candidates.

Configured sources come first; with `default_sources` on, every agent's default
location (docs/formats.md) that exists is watched too, honouring the agents' own
overrides (CLAUDE_CONFIG_DIR, CODEX_HOME, PI_CODING_AGENT_DIR). Locations that do not
exist yet are re-checked by the periodic reconciliation.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from memoryd.config import Settings

SUFFIXES = (".jsonl", ".json")


@dataclass(frozen=True, slots=True)
class Source:
    agent: str  # a format name or "auto"
    root: Path
    default: bool = False

    def as_dict(self) -> dict[str, object]:
        return {"agent": self.agent, "path": str(self.root), "default": self.default,
                "exists": self.root.is_dir()}


def default_locations(environ: Mapping[str, str]) -> list[Source]:
    home = Path(environ.get("HOME") or Path.home())
    out: list[Source] = []
    claude = [Path(p).expanduser() for p in environ.get("CLAUDE_CONFIG_DIR", "").split(",") if p]
    for base in claude or [home / ".claude", home / ".config" / "claude"]:
        out.append(Source("claude-code", base / "projects", True))
    codex = Path(environ.get("CODEX_HOME") or home / ".codex").expanduser()
    out += [Source("codex", codex / "sessions", True),
            Source("codex", codex / "archived_sessions", True)]
    out.append(Source("gemini-cli", home / ".gemini" / "tmp", True))
    pi = Path(environ.get("PI_CODING_AGENT_DIR") or home / ".pi" / "agent").expanduser()
    out.append(Source("pi", pi / "sessions", True))
    out.append(Source("openclaw", home / ".openclaw" / "agents", True))
    out.append(Source("nanobot", home / ".nanobot", True))
    return out


def configured_sources(settings: Settings, environ: Mapping[str, str]) -> list[Source]:
    out = [Source(s.agent, s.path.absolute()) for s in settings.watch.sources]
    if settings.watch.default_sources:
        taken = {s.root for s in out}
        out += [s for s in default_locations(environ) if s.root not in taken]
    return out


class Candidates:
    """Decides whether a path is worth reading: a .jsonl/.json file, not excluded, not
    one of memoryd's own files, not an agent's temp or lock file."""

    def __init__(self, exclude: Iterable[str], own_dirs: Iterable[Path]) -> None:
        self._exclude = tuple(exclude)
        self._own = tuple(str(d.absolute()) + os.sep for d in own_dirs)

    def add_exclude(self, patterns: Iterable[str]) -> None:
        """More glob patterns never read (`memoryctl exclude`), from now on."""
        self._exclude += tuple(p for p in patterns if p not in self._exclude)

    def __call__(self, path: str) -> bool:
        name = os.path.basename(path)
        if not name.endswith(SUFFIXES) or name.startswith("."):
            return False
        if path.startswith(self._own):
            return False
        return not any(fnmatch.fnmatch(path, pat) for pat in self._exclude)

    def excluded_dir(self, path: str) -> bool:
        return (path + os.sep).startswith(self._own) or any(
            fnmatch.fnmatch(path, pat) for pat in self._exclude)


def owner(sources: Iterable[Source], path: Path) -> Source | None:
    """The source whose root holds `path` (the deepest one)."""
    best: Source | None = None
    for s in sources:
        deeper = best is None or len(s.root.parts) > len(best.root.parts)
        if deeper and path.is_relative_to(s.root):
            best = s
    return best


def walk(root: Path, candidate: Candidates) -> Iterator[tuple[Path, os.stat_result]]:
    """Every candidate file under `root` with its stat (no symlinks followed)."""
    stack = [str(root)]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if not candidate.excluded_dir(e.path):
                            stack.append(e.path)
                    elif e.is_file(follow_symlinks=False) and candidate(e.path):
                        yield Path(e.path), e.stat(follow_symlinks=False)
                except OSError:
                    continue
