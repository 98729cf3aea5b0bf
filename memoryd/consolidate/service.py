"""Consolidation as one service for the daemon: the day's daily note and MEMORY.md
admission (`consolidate`), one session's summary into memory (`admit_session`), and the
HTTP/CLI job bodies. File work runs in threads; SQLite on the store's thread."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryd.config import Settings
from memoryd.consolidate import admission, recurrence
from memoryd.memory import daily, history
from memoryd.consolidate.admission import Candidate, Plan
from memoryd.consolidate.candidates import admission_candidates, candidate, note_items
from memoryd.consolidate.clock import Clock, day_bounds, local_day, parse_day, zone
from memoryd.consolidate.firings import Firings
from memoryd.consolidate.model import model_candidates
from memoryd.consolidate.prune import prune
from memoryd.consolidate.subjects import subjects
from memoryd.errors import BadRequestError, NotFoundError
from memoryd.memory import Document, MemoryFile
from memoryd.memory.document import item_key
from memoryd.store import Store
from memoryd.store import consolidation_runs as runs_sql
from memoryd.store import memories as sql

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
        self._said: dict[int, tuple[recurrence.Statement, ...]] = {}  # see _pool
        self.firings = Firings(store, clock, self.consolidate)

    @property
    def busy(self) -> asyncio.Lock:
        """Held while this writes the memory files (fleet_sync waits for it)."""
        return self._lock

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
        key = f"{which}:{day.isoformat()}"
        try:
            # one run per firing for the whole fleet: whichever machine fires first
            if not await self.firings.claim(key, None if which == "nightly" else FIRING_S):
                log.info("consolidation of %s (%s) already claimed by another machine",
                         day, which)
                return
            await self.firings.run(key, self.consolidate(day, trigger=which))
        except Exception:
            log.exception("consolidation of %s failed", day)

    # -- consolidation -------------------------------------------------------------------

    async def consolidate(self, day: dt.date, dry_run: bool = False,
                          trigger: str = "manual") -> dict[str, Any]:
        """The day's note and admission; each run that writes is recorded with its counts
        (or its error) for status (consolidate.runs)."""
        t0 = time.monotonic()
        try:
            report = await self._consolidate(day, dry_run, t0)
        except Exception as e:
            if not dry_run:
                err = f"{type(e).__name__}: {e}"[:500]
                with contextlib.suppress(Exception):  # the store may be what failed
                    await self.store.write(lambda c: runs_sql.record_run(
                        c, day=day.isoformat(), at=self.clock(), trigger=trigger, ok=False,
                        error=err, seconds=round(time.monotonic() - t0, 3)))
            raise
        if not dry_run:
            m = report["memory"]
            counts = {"sessions": report["sessions"], "daily_added": report["daily"]["added"],
                      **{k: len(m[k]) for k in ("added", "confirmed", "superseded", "demoted",
                                                 "dropped")}}
            await self.store.write(lambda c: runs_sql.record_run(
                c, day=report["date"], at=self.clock(), trigger=trigger, ok=True,
                seconds=report["seconds"], counts=counts))
        return report

    async def _consolidate(self, day: dt.date, dry_run: bool, t0: float) -> dict[str, Any]:
        start, end = day_bounds(day, self.tz)

        def gather(c: Any) -> list[tuple[dict[str, Any], list[dict[str, Any]], bool]]:
            out = []
            for s in sql.day_sessions(c, start, end):
                units = sql.day_units(c, s["pk"], start, end)
                whole = (s["first_ts"] or 0) >= start and (s["last_ts"] or 0) < end
                out.append((s, units, whole))
            return out

        async with self._lock:
            if not dry_run:
                await self._prune()  # a session forgotten by a path that did not say so
            rows = await self.store.read(gather)
            pool = await self._pool(start - recurrence.LOOKBACK_DAYS * 86400, end)
            items: list[daily.NoteItem] = []
            offered: list[tuple[int, daily.NoteItem]] = []
            dropped: list[str] = []
            cands: list[Candidate] = []
            left: list[dict[str, str]] = []  # what admission did not take, and why
            made_by: dict[str, int] = {}  # candidates by what made them
            read_by: dict[str, int] = {}  # sessions by what read them for admission
            for s, units, whole in rows:
                # a session's extractive work is CPU (seconds for a long one, under
                # load): off the event loop, which meanwhile serves searches and ingest
                got, noise = await asyncio.to_thread(note_items, s, units,
                                                     whole_session=whole)
                items += got
                offered += [(int(s["pk"]), it) for it in got]
                dropped += noise
                found, reader = await self._candidates(s, units, left)
                read_by[reader] = read_by.get(reader, 0) + 1
                found = await asyncio.to_thread(_recurring, s, units, found, pool)
                for c in found:
                    made_by[c.made_by] = made_by.get(c.made_by, 0) + 1
                cands += found
            iso = day.isoformat()
            added = await asyncio.to_thread(daily.write_note, self.memory_dir, iso, items,
                                            dry_run)
            if not dry_run and offered:
                await self.store.write(lambda c: _record_notes(c, iso, offered, added))
            mem = await self._admit(cands, day, dry_run, left)
        report = {"date": iso, "dry_run": dry_run, "sessions": len(rows),
                  "daily": {"path": str(daily.note_path(self.memory_dir, iso)),
                            "added": len(added), "items": [i.line() for i in added],
                            "dropped": dropped},
                  "memory": mem, "candidates_by": made_by, "sessions_by": read_by,
                  "seconds": round(time.monotonic() - t0, 3)}
        self.last_run = {"date": iso, "at": self.clock(), "dry_run": dry_run,
                         "added": len(mem["added"]), "daily_added": len(added)}
        log.info("consolidated %s: %d sessions, %d note items, memory +%d ~%d -%d%s", iso,
                 len(rows), len(added), len(mem["added"]), len(mem["confirmed"]),
                 len(mem["superseded"]) + len(mem["demoted"]), " (dry run)" if dry_run else "")
        return report

    async def admit_session(self, session_id: str, agent: str | None = None,
                            dry_run: bool = False, *,
                            machine: str | None = None) -> dict[str, Any]:
        """A session's summary and requests through admission (the to_memory flow);
        `machine` picks one of a fleet's sessions of the same id."""
        def load(c: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
            rows = [r for r in sql.day_sessions(c, float("-inf"), float("inf"))
                    if r["session_id"] == session_id and (agent is None or r["agent"] == agent)
                    and (machine is None or (r["machine"] or None) == machine)]
            if not rows:
                raise NotFoundError(f"no session {session_id!r}", field="id")
            return rows[0], sql.day_units(c, rows[0]["pk"], None, None)

        s, units = await self.store.read(load)
        now = self.clock()
        pool = await self._pool(now - recurrence.LOOKBACK_DAYS * 86400, now + 1)
        left: list[dict[str, str]] = []
        found = (await self._candidates(s, units, left))[0]
        cands = await asyncio.to_thread(_recurring, s, units, found, pool)
        async with self._lock:
            mem = await self._admit(cands, self.today(), dry_run, left)
        return {"agent": s["agent"], "session_id": s["session_id"], "dry_run": dry_run,
                "memory": mem}

    async def _pool(self, start: float, end: float) -> recurrence.Pool:
        """What the user said in [start, end), as statements; each message is scored once
        (kept while it is inside a look-back window, so memory stays bounded)."""
        rows = await self.store.read(lambda c: sql.user_messages(c, start, end))
        new = [uid for uid, _ in rows if uid not in self._said]
        texts = await self.store.read(lambda c: sql.unit_texts(c, new)) if new else {}

        def build() -> recurrence.Pool:
            said = {uid: self._said[uid] if uid in self._said
                    else recurrence.statements(pk, uid, texts.get(uid, "")) for uid, pk in rows}
            self._said = said
            return recurrence.Pool(said)

        return await asyncio.to_thread(build)

    async def _candidates(self, s: dict[str, Any], units: list[dict[str, Any]],
                          dropped: list[dict[str, str]]) -> tuple[list[Candidate], str]:
        """The model's Q1 items when one is usable, else (or on garbage) the scorer's,
        and which of them read the session; what either left out goes to `dropped`."""
        if self.llm is not None and await self.llm.available() is None:
            found = await model_candidates(self.llm, s, units, dropped)
            if found is not None:
                return found, str(self.llm.model)
        return await asyncio.to_thread(admission_candidates, s, units, dropped), "extractive"

    async def _admit(self, cands: Sequence[Candidate], day: dt.date, dry_run: bool,
                     left: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
        provenance = await self.store.read(sql.all_active)
        cfg = self.cfg
        active = await self._active_days(day) if cfg.ttl_days else None

        def planner(doc: Document) -> tuple[list[str] | None, Plan]:
            p = admission.plan(doc, cands, day, provenance=provenance,
                               similar=cfg.similarity, max_entries=cfg.max_entries,
                               ttl_days=cfg.ttl_days, active_days=active)
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
        out["dropped"] = _dropped(cands, p, left)
        return out

    async def _active_days(self, day: dt.date) -> list[str]:
        """The days up to `day` the history has sessions on (their first and last days):
        the clock the TTL counts (admission.plan)."""
        _, end = day_bounds(day, self.tz)
        spans = await self.store.read(lambda c: sql.session_spans(c, end))
        days = {local_day(t, self.tz).isoformat() for span in spans for t in span}
        return sorted(d for d in days if d <= day.isoformat())

    def _record(self, c: Any, p: Plan, day: dt.date) -> None:
        iso = day.isoformat()

        def said_on(ids: list[int]) -> str:
            """The day the user said it (a recurrence's other session spoke earlier)."""
            ts = sql.units_first_ts(c, ids)
            return iso if ts is None else local_day(ts, self.tz).isoformat()

        for cand in p.added:
            days = {pk: said_on(ids) for pk, ids in cand.evidence}
            iid = sql.record_item(c, key=cand.key, item=cand.text, source=cand.source,
                                  scope=cand.scope, importance=cand.importance,
                                  reasons=cand.reasons, day=iso,
                                  first_seen=min([iso, *days.values()]),
                                  made_by=cand.made_by, prompt_version=cand.prompt_version,
                                  subject=cand.subject)
            if cand.session_pk is not None:
                sql.link_session(c, iid, cand.session_pk, cand.unit_ids,
                                 said_on(cand.unit_ids))
            for pk, ids in cand.evidence:  # said in other sessions too, on their days
                if sql.link_session(c, iid, pk, ids, days[pk]):
                    sql.confirm_item(c, cand.key, days[pk])
        for cand, key in p.confirmed:
            row = sql.provenance_by_keys(c, [key]).get(key)
            if row is None or cand.session_pk is None:
                continue
            for pk, ids in [(cand.session_pk, cand.unit_ids), *cand.evidence]:
                d = said_on(ids)
                if sql.link_session(c, row["id"], pk, ids, d):
                    sql.confirm_item(c, key, d)
        for key, state, successor in p.gone:
            sql.set_state(c, key, state, successor)

    # -- provenance ----------------------------------------------------------------------

    async def why(self, line: int) -> dict[str, Any]:
        doc = await self.memory.document()
        e = doc.entry_at(line)
        if e is None:
            raise NotFoundError(f"line {line}: not an entry of MEMORY.md", field="line")
        def load(c: Any) -> list[dict[str, Any]]:
            rows = sql.provenance_by_keys(c, [item_key(i) for i in e.items])
            out = []
            for it in e.items:
                r = rows.get(item_key(it))
                if r is None:
                    out.append({"item": it, "provenance": None,
                                "subjects": [s.describe() for s in subjects(it)]})
                    continue
                out.append({"item": it, "provenance": {
                    k: r[k] for k in ("source", "scope", "importance", "first_seen",
                                      "last_confirmed", "confirmations", "made_by",
                                      "prompt_version", "state", "subject")},
                    "subjects": [s.describe() for s in subjects(it)],
                    "reasons": json.loads(r["reasons"]), "sessions": sql.item_sessions(c, r["id"]),
                    "replaced": sql.replaced_chain(c, item_key(it))})
            return out

        return {"line": line, "entry": e.as_dict(), "items": await self.store.read(load)}

    # -- forget --------------------------------------------------------------------------

    async def on_forget(self) -> dict[str, Any]:
        """After sessions were forgotten: what only they stood behind leaves MEMORY.md
        and the daily notes (and its provenance goes)."""
        async with self._lock:
            return await self._prune()

    async def _prune(self) -> dict[str, Any]:
        return await prune(self.store, self.memory, self.memory_dir)


def _dropped(cands: Sequence[Candidate], p: Plan, left: Sequence[dict[str, str]]
             ) -> list[dict[str, str]]:
    """Every candidate sentence that is not a new MEMORY.md line, and why: a duplicate
    of an entry (which it confirmed), superseded or demoted within this same run, below
    the admission threshold, or holding a secret."""
    taken = {c.text for c in cands}
    out = [d for d in left if d["item"] not in taken]  # a recurrence may have taken it
    for a in p.actions:
        if a.action == "confirmed":
            out.append({"item": a.item, "reason": "duplicate", "why": a.why})
        elif a.action in ("superseded", "demoted") and a.item in taken:
            why = (f"replaced by a later item: {a.successor}" if a.successor else a.why)
            out.append({"item": a.item, "reason": a.action, "why": why})
    return out


def _recurring(s: dict[str, Any], units: list[dict[str, Any]], cands: list[Candidate],
               pool: recurrence.Pool) -> list[Candidate]:
    """`cands` weighed by what the user said in other sessions too (consolidate.recurrence)."""
    pk = int(s["pk"])
    mine = [st for u in units if u.get("role") == "user" and u.get("kind") == "message"
            for st in (pool.per_unit[u["id"]] if u["id"] in pool.per_unit else
                       recurrence.statements(pk, int(u["id"]), str(u.get("content") or "")))]
    return recurrence.apply(cands, mine, pool, lambda sc, uid: candidate(s, [sc], uid))


def _record_notes(c: Any, day: str, offered: Sequence[tuple[int, daily.NoteItem]],
                  added: Sequence[daily.NoteItem]) -> None:
    """Each session's share of the day's note lines (see store.memories.link_note_item)."""
    written = {item_key(it.text): it for it in added}
    for pk, it in offered:
        k = item_key(it.text)
        line = written.get(k, it)
        sql.link_note_item(c, day=day, key=k, item=line.text, tag=line.tag, session_pk=pk,
                           unit_ids=[], create=k in written)
