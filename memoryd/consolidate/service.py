"""Consolidation as one service for the daemon: the day's daily note and MEMORY.md
admission (`consolidate`), one session's summary into memory (`admit_session`), and the
HTTP/CLI job bodies. File work runs in threads; SQLite on the store's thread."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.config import Settings
from memoryd.consolidate import admission, daily, history
from memoryd.consolidate.admission import Candidate, Plan
from memoryd.consolidate.candidates import admission_candidates, note_items
from memoryd.consolidate.clock import Clock, day_bounds, local_day, parse_day, zone
from memoryd.consolidate.model import model_candidates
from memoryd.errors import BadRequestError, NotFoundError
from memoryd.memory import Document, MemoryFile
from memoryd.store import Store
from memoryd.store import memories as sql
from memoryd.store.jobs import claim_once

# machines whose schedulers fire within this of each other run one consolidation
FIRING_S = 900.0

if TYPE_CHECKING:
    from memoryd.llm import LLM

log = logging.getLogger(__name__)


def flag(v: Any, field: str) -> bool:
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return v.lower() in ("1", "true", "yes", "on")
    raise BadRequestError(f"{field}: expected true or false", field=field)


class Consolidator:
    def __init__(self, settings: Settings, store: Store, memory: MemoryFile, memory_dir: Path,
                 *, clock: Clock = time.time, llm: LLM | None = None) -> None:
        self.settings = settings
        self.llm = llm
        self.cfg = settings.consolidate
        self.store = store
        self.memory = memory
        self.memory_dir = memory_dir
        self.clock = clock
        self.tz = zone(self.cfg.timezone)
        self._lock = asyncio.Lock()  # one consolidation at a time
        self.last_run: dict[str, Any] | None = None

    def today(self) -> dt.date:
        return local_day(self.clock(), self.tz)

    # -- job bodies ----------------------------------------------------------------------

    async def run_job(self, params: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/jobs/consolidate/run: `{"date": "YYYY-MM-DD", "dry_run": false}`."""
        unknown = set(params) - {"date", "dry_run"}
        if unknown:
            f = sorted(unknown)[0]
            raise BadRequestError(f"{f}: unknown field", field=f)
        d = params.get("date")
        day = self.today() if d in (None, "") else parse_day(str(d))
        return await self.consolidate(day, dry_run=flag(params.get("dry_run"), "dry_run"))

    async def scheduled(self, which: str) -> None:
        """A cron run: the day so far, or (nightly) yesterday's last pass."""
        day = self.today() - dt.timedelta(days=1 if which == "nightly" else 0)
        try:
            # one run per firing for the whole fleet: whichever machine fires first
            if not await self.store.write(lambda c: claim_once(
                    c, "consolidate", f"{which}:{day.isoformat()}", self.store.machine,
                    self.clock(), None if which == "nightly" else FIRING_S)):
                log.info("consolidation of %s (%s) already claimed by another machine",
                         day, which)
                return
            await self.consolidate(day)
        except Exception:
            log.exception("consolidation of %s failed", day)

    # -- consolidation -------------------------------------------------------------------

    async def consolidate(self, day: dt.date, dry_run: bool = False) -> dict[str, Any]:
        t0 = time.monotonic()
        start, end = day_bounds(day, self.tz)

        def gather(c: Any) -> list[tuple[dict[str, Any], list[dict[str, Any]], bool]]:
            out = []
            for s in sql.day_sessions(c, start, end):
                units = sql.day_units(c, s["pk"], start, end)
                whole = (s["first_ts"] or 0) >= start and (s["last_ts"] or 0) < end
                out.append((s, units, whole))
            return out

        async with self._lock:
            rows = await self.store.read(gather)
            items: list[daily.NoteItem] = []
            dropped: list[str] = []
            cands: list[Candidate] = []
            made_by: dict[str, int] = {}
            for s, units, whole in rows:
                got, noise = note_items(s, units, whole_session=whole)
                items += got
                dropped += noise
                found = await self._candidates(s, units)
                for c in found:
                    made_by[c.made_by] = made_by.get(c.made_by, 0) + 1
                cands += found
            iso = day.isoformat()
            added = await asyncio.to_thread(daily.write_note, self.memory_dir, iso, items,
                                            dry_run)
            mem = await self._admit(cands, day, dry_run)
        report = {"date": iso, "dry_run": dry_run, "sessions": len(rows),
                  "daily": {"path": str(daily.note_path(self.memory_dir, iso)),
                            "added": len(added), "items": [i.line() for i in added],
                            "dropped": dropped},
                  "memory": mem, "candidates_by": made_by,
                  "seconds": round(time.monotonic() - t0, 3)}
        self.last_run = {"date": iso, "at": self.clock(), "dry_run": dry_run,
                         "added": len(mem["added"]), "daily_added": len(added)}
        log.info("consolidated %s: %d sessions, %d note items, memory +%d ~%d -%d%s", iso,
                 len(rows), len(added), len(mem["added"]), len(mem["confirmed"]),
                 len(mem["superseded"]) + len(mem["demoted"]), " (dry run)" if dry_run else "")
        return report

    async def admit_session(self, session_id: str, agent: str | None = None,
                            dry_run: bool = False) -> dict[str, Any]:
        """A session's summary and requests through admission (the to_memory flow)."""
        def load(c: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            rows = [r for r in sql.day_sessions(c, float("-inf"), float("inf"))
                    if r["session_id"] == session_id and (agent is None or r["agent"] == agent)]
            if not rows:
                raise NotFoundError(f"no session {session_id!r}", field="id")
            return rows[0], sql.day_units(c, rows[0]["pk"], None, None)

        s, units = await self.store.read(load)
        cands = await self._candidates(s, units)
        async with self._lock:
            mem = await self._admit(cands, self.today(), dry_run)
        return {"agent": s["agent"], "session_id": s["session_id"], "dry_run": dry_run,
                "memory": mem}

    async def _candidates(self, s: dict[str, Any], units: list[dict[str, Any]]
                          ) -> list[Candidate]:
        """The model's Q1 items when one is usable, else (or on garbage) the scorer's."""
        if self.llm is not None and await self.llm.available() is None:
            found = await model_candidates(self.llm, s, units)
            if found is not None:
                return found
        return admission_candidates(s, units)

    async def _admit(self, cands: Sequence[Candidate], day: dt.date,
                     dry_run: bool) -> dict[str, Any]:
        provenance = await self.store.read(sql.all_active)
        cfg = self.cfg

        def planner(doc: Document) -> tuple[list[str] | None, Plan]:
            p = admission.plan(doc, cands, day, provenance=provenance,
                               similar=cfg.similarity, max_entries=cfg.max_entries,
                               ttl_days=cfg.ttl_days)
            if dry_run:
                return None, p
            # HISTORY.md first: a crash before MEMORY.md is written repeats the move
            # next time, and the history append is idempotent
            history.append(self.memory_dir, p.history)
            return p.lines, p

        if dry_run:
            doc = await self.memory.document()
            p = await asyncio.to_thread(planner, doc)
            p = p[1]
        else:
            p = await self.memory.rewrite("consolidate", planner)
            await self.store.write(lambda c: self._record(c, p, day))
        out: dict[str, list[dict[str, Any]]] = {k: [] for k in
                                                ("added", "confirmed", "superseded", "demoted")}
        for a in p.actions:
            out.setdefault(a.action, []).append(a.as_dict())
        return out

    @staticmethod
    def _record(c: Any, p: Plan, day: dt.date) -> None:
        iso = day.isoformat()
        for cand in p.added:
            iid = sql.record_item(c, key=cand.key, item=cand.text, source=cand.source,
                                  scope=cand.scope, importance=cand.importance,
                                  reasons=cand.reasons, day=iso, made_by=cand.made_by,
                                  prompt_version=cand.prompt_version)
            if cand.session_pk is not None:
                sql.link_session(c, iid, cand.session_pk, cand.unit_ids, iso)
        for cand, key in p.confirmed:
            row = sql.provenance_by_keys(c, [key]).get(key)
            if row is None or cand.session_pk is None:
                continue
            if sql.link_session(c, row["id"], cand.session_pk, cand.unit_ids, iso):
                sql.confirm_item(c, key, iso)
        for key, state, successor in p.gone:
            sql.set_state(c, key, state, successor)

    # -- provenance ----------------------------------------------------------------------

    async def why(self, line: int) -> dict[str, Any]:
        doc = await self.memory.document()
        e = doc.entry_at(line)
        if e is None:
            raise NotFoundError(f"line {line}: not an entry of MEMORY.md", field="line")
        from memoryd.memory.document import item_key

        def load(c: Any) -> list[dict[str, Any]]:
            rows = sql.provenance_by_keys(c, [item_key(i) for i in e.items])
            out = []
            for it in e.items:
                r = rows.get(item_key(it))
                if r is None:
                    out.append({"item": it, "provenance": None})
                    continue
                out.append({"item": it, "provenance": {
                    k: r[k] for k in ("source", "scope", "importance", "first_seen",
                                      "last_confirmed", "confirmations", "made_by",
                                      "prompt_version", "state")},
                    "reasons": json.loads(r["reasons"]), "sessions": sql.item_sessions(c, r["id"])})
            return out

        return {"line": line, "entry": e.as_dict(), "items": await self.store.read(load)}

    async def on_forget(self) -> None:
        await self.store.write(sql.drop_orphans)
