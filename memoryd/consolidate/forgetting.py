"""Taking things out of memory on request:

- `forget(query)`: every stored turn matching all the query's words, everywhere: the
  units and their index rows (through the store's delete path), the summaries of their
  sessions (dropped and queued for rebuilding, since they may quote what was forgotten)
  and one-liners (they live on the units). A memory item (MEMORY.md, HISTORY.md) whose
  every unit in a session went loses that session; an item no session stands behind
  any more leaves the files (`pruned`, the consolidator's prune). Entries that only
  mention the query's words (the user's own, say) are counted and named for review.
- `exclude(path | project)`: stop reading it (glob patterns added to the candidate
  filter, persisted in `exclusions`), and with `purge`, forget the sessions stored
  from it (and prune what only they stood behind from the memory files).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from memoryd.errors import BadRequestError
from memoryd.memory import MemoryFile
from memoryd.recall.retrieval import PARAMS, plan_query, retrieve_sync
from memoryd.ingest.sources import Candidates
from memoryd.store import Store
from memoryd.store.memories import unlink_units
from memoryd.store.sessions import forget_session, forget_units

if TYPE_CHECKING:  # the daemon hands it over (consolidate does not import index)
    from memoryd.index.protocol import Index

log = logging.getLogger(__name__)

MAX_UNITS = 20_000  # per request; a larger forget is done in several
EVERY_MATCH = dataclasses.replace(PARAMS, dedupe=False, session_repeat=1.0,
                                  candidates=MAX_UNITS, max_candidates=MAX_UNITS)

Resummarize = Callable[[int], Awaitable[None]]
Prune = Callable[[], Awaitable[dict[str, Any]]]


class Forgetting:
    def __init__(self, store: Store, candidate: Candidates, memory: MemoryFile | None,
                 resummarize: Resummarize, pruned: Prune | None = None, *,
                 index: Index) -> None:
        self.store, self.candidate, self.memory = store, candidate, memory
        self.index = index  # what finds the units a forget by query names
        self.resummarize = resummarize
        self.pruned = pruned  # after a forget: memory items no session stands behind leave

    async def load_exclusions(self) -> int:
        rows = await self.store.read(lambda c: c.execute(
            "SELECT patterns FROM exclusions WHERE machine = ?",
            (self.store.machine,)).fetchall())
        for r in rows:
            self.candidate.add_exclude(json.loads(r[0]))
        return len(rows)

    # -- forget by query ------------------------------------------------------------------

    async def forget(self, query: str, *, agent: str | None = None,
                     project: str | None = None, dry_run: bool = True) -> dict[str, Any]:
        plan = plan_query(query, "and")
        if plan.match is None:
            raise BadRequestError("the query has no searchable words", field="query")

        def find(c: sqlite3.Connection) -> list[Any]:
            return retrieve_sync(c, self.index, query, k=MAX_UNITS, mode="and",
                                 agent=agent, project=project, params=EVERY_MATCH).hits

        hits = await self.store.read(find)
        sessions: dict[tuple[str, str], dict[str, Any]] = {}
        for h in hits:
            s = sessions.setdefault((h.agent, h.session_id), {
                "agent": h.agent, "session_id": h.session_id, "project": h.project,
                "units": 0})
            s["units"] += 1
        out: dict[str, Any] = {
            "query": query, "terms": plan.terms, "dry_run": dry_run, "units": len(hits),
            "sessions": sorted(sessions.values(), key=lambda s: -s["units"]),
            "examples": [_excerpt(h.content, plan.terms) for h in hits[:5]],
            "more": len(hits) >= MAX_UNITS}
        if dry_run or not hits:
            return out
        ids = [h.unit_id for h in hits]

        def delete(c: sqlite3.Connection) -> tuple[dict[int, int], int]:
            per = forget_units(c, ids)
            unlink_units(c, ids, list(per))  # memory items these units stood behind
            # the served-context log quotes queries: drop the entries that asked for it
            like = " AND ".join("query LIKE ? ESCAPE '\\'" for _ in plan.terms)
            args = ["%" + t.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                    + "%" for t in plan.terms]
            served = c.execute(f"DELETE FROM served_context WHERE {like}", args).rowcount
            return per, served

        per, out["served_log_entries"] = await self.store.write(delete)
        try:  # gone from search before we answer
            await self.store.indexed()
        except TimeoutError:
            log.warning("forgot %d units; the search index is still catching up", len(ids))
        for pk in per:
            await self.resummarize(pk)
        out["summaries_rebuilt"] = len(per)
        if self.pruned is not None:
            out["memory"] = await self.pruned()
        out["memory_entries"], out["memory_lines"] = await self._memory_mentions(plan.terms)
        log.info("forgot %d units in %d sessions (query of %d terms)", len(ids), len(per),
                 len(plan.terms))  # the query itself is not logged: it names the secret
        return out

    async def _memory_mentions(self, terms: list[str]) -> tuple[int, list[int]]:
        if self.memory is None or not terms:
            return 0, []
        r = await self.memory.search(terms, "and", 50)
        return r.total, [e.line for e in r.results]

    # -- exclusions -----------------------------------------------------------------------

    async def exclusions(self) -> list[dict[str, Any]]:
        rows = await self.store.read(lambda c: c.execute(
            "SELECT kind, value, patterns, created_at FROM exclusions WHERE machine = ? "
            "ORDER BY id", (self.store.machine,)).fetchall())
        return [{**dict(r), "patterns": json.loads(r["patterns"])} for r in rows]

    async def exclude(self, kind: str, value: str, *, purge: bool) -> dict[str, Any]:
        if not value.startswith("/") or "\x00" in value:
            raise BadRequestError("value must be an absolute path", field="value")
        value = os.path.normpath(value)

        machine = self.store.machine  # a path is this machine's (fleet mode)

        def apply(c: sqlite3.Connection) -> dict[str, Any]:
            if kind == "path":
                patterns = [value, value.rstrip("/") + "/*"]
                pks = [r[0] for r in c.execute(
                    "SELECT DISTINCT u.session_pk FROM units u JOIN files f ON f.id = u.file_id "
                    "WHERE f.machine = ? AND (f.path = ? OR substr(f.path, 1, ?) = ?)",
                    (machine, value, len(value) + 1, value.rstrip("/") + "/"))]
            else:
                pks, patterns = _project_files(c, value, machine)
            c.execute("INSERT INTO exclusions (machine, kind, value, patterns, created_at) "
                      "VALUES (?, ?, ?, ?, ?) ON CONFLICT (machine, kind, value) DO UPDATE "
                      "SET patterns = excluded.patterns",
                      (machine, kind, value, json.dumps(patterns), time.time()))
            purged = None
            if purge:
                purged = {"sessions": len(pks),
                          "units": sum(forget_session(c, pk) for pk in pks)}
            return {"kind": kind, "value": value, "patterns": patterns,
                    "sessions_stored": len(pks), "purged": purged}

        out = await self.store.write(apply)
        self.candidate.add_exclude(out["patterns"])
        if purge and out["purged"]["sessions"] and self.pruned is not None:
            out["memory"] = await self.pruned()
        log.info("excluded %s %s (%d patterns)%s", kind, value, len(out["patterns"]),
                 f"; purged {out['purged']['units']} units" if out["purged"] else "")
        return out


def _project_files(c: sqlite3.Connection, project: str,
                   machine: str = "") -> tuple[list[int], list[str]]:
    """This machine's sessions of a project (its directory or below) and patterns for the
    files they came from: a whole folder when it is the project's own (named for it, as
    Claude Code's `projects/<encoded cwd>`, and every session stored from it is of this
    project), so its future sessions are excluded too; else the files one by one. A
    folder that merely holds nothing else yet (a generic source's root, Codex's day) is
    not the project's: excluding it would drop every other project's sessions to come.
    Other machines' files and sessions are theirs."""
    prefix = project.rstrip("/") + "/"
    pks = [r[0] for r in c.execute(
        "SELECT id FROM sessions WHERE machine = ? AND (project = ? OR substr(project, 1, ?) "
        "= ?)", (machine, project, len(prefix), prefix))]
    if not pks:
        return [], []
    marks = ",".join("?" * len(pks))
    files = [r[0] for r in c.execute(
        f"SELECT DISTINCT f.path FROM units u JOIN files f ON f.id = u.file_id "
        f"WHERE u.session_pk IN ({marks}) AND f.machine = ?", (*pks, machine))]
    patterns: list[str] = []
    for d in sorted({os.path.dirname(f) for f in files}):
        others = c.execute(
            "SELECT count(*) FROM units u JOIN files f ON f.id = u.file_id "
            "JOIN sessions s ON s.id = u.session_pk WHERE f.machine = ? AND "
            "substr(f.path, 1, ?) = ? "
            "AND NOT (s.project = ? OR substr(coalesce(s.project, ''), 1, ?) = ?)",
            (machine, len(d) + 1, d + "/", project, len(prefix), prefix)).fetchone()[0]
        if others == 0 and _named_for(d, project):
            patterns += [d, d + "/*"]
        else:
            patterns += [f for f in files if os.path.dirname(f) == d]
    return pks, patterns


def _named_for(folder: str, project: str) -> bool:
    """The folder is the project's: the project itself, its name, or Claude Code's
    encoding of its path (every character but letters and digits made '-')."""
    name, project = os.path.basename(folder), project.rstrip("/")
    return folder == project or name == os.path.basename(project) or \
        name == re.sub(r"[^A-Za-z0-9]", "-", project)


def _excerpt(text: str, terms: list[str], width: int = 80) -> str:
    flat = " ".join(text.split())
    low = flat.lower()
    at = min((i for t in terms if (i := low.find(t.lower())) >= 0), default=0)
    start = max(0, at - width // 3)
    return ("…" if start else "") + flat[start:start + width] + (
        "…" if start + width < len(flat) else "")
