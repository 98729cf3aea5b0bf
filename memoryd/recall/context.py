"""Context requests: what an agent should remember right now, inside a token budget.

`ContextBuilder.build` gathers four sections — long-term memory (MEMORY.md entries,
relevant first, then recent), the asking session's rolling summary, units recalled
from past sessions with their full original content, and (when asked) daily notes —
and renders them as one fenced markdown block marked as recalled data. Tokens are
counted with a real tokenizer on the rendered text, which never exceeds the budget:
items are trimmed or cut, and every cut is reported.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memoryd.index.protocol import Index
from memoryd.recall import archived as archive_recall
from memoryd.recall import long_term
from memoryd.api import ContextRequest
from memoryd.embed import Embedder, vector_query
from memoryd.errors import StoreUnavailableError
from memoryd.recall.fence import CLOSE, OPEN, defuse
from memoryd.recall.fit import Counts, fit_counted
from memoryd.recall.offline import offline_hits, stale_note
from memoryd.recall.rows import read_rows
from memoryd.runtime.idle_release import RELEASE
from memoryd.memory import Document, Entry, MemoryFile
from memoryd.recall.retrieval import Hit, plan_query, retrieve_sync
from memoryd.store import Store
from memoryd.tokens import count_fixed

MIN_ITEM_TOKENS = 24  # an item trimmed below this is cut instead
SHARES = {"session_summary": 0.25, "long_term": 0.2, "daily": 0.2}  # caps; recalled gets the rest
FILES_WAIT_S = 60.0  # the reader's wait for MEMORY.md and the notes (a stuck disk)


@dataclass
class Section:
    name: str
    title: str
    items: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None  # why the section is empty

    @property
    def tokens(self) -> int:
        return sum(i["tokens"] for i in self.items)


@dataclass
class LongTerm:
    """The long-term section as read: its ranking waits for the project (`_fit`)."""
    section: Section
    doc: Document | None = None  # MEMORY.md (None: not included)
    near: dict[int, float] | None = None  # each entry's cosine with the query, by line


def include_of(req: ContextRequest) -> set[str]:
    """The sections asked for (by default all but the daily notes)."""
    return set(req.include or ("long_term", "session_summary", "recalled"))


def git_root(cwd: str) -> str:
    """The git root holding `cwd` (the project), or `cwd` itself outside a repository
    (`cwd` normalized as `Path` does; the walk up in `os.path`: a third of the time of
    `Path.parents`, on the reader thread of every context)."""
    start = d = str(Path(cwd))
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        up = os.path.dirname(d) or "."
        if up == d:
            return start
        d = up


def in_project(project: str | None, root: str | None) -> bool:
    if not project or not root:
        return False
    return project == root or project.startswith(root.rstrip("/") + "/")


def label(h: Hit) -> str:
    return label_of(h.kind, h.role, h.tool_name)


def label_of(kind: str, role: str, tool_name: str | None) -> str:
    if kind == "tool_result":
        return f"Executed '{tool_name or 'tool'}'"
    if kind == "tool_call":
        return f"Called '{tool_name or 'tool'}'"
    if kind == "compaction":
        return "Compaction summary"
    return {"user": "User said", "assistant": "Assistant replied"}.get(role, "Note")


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "time unknown"


class ContextBuilder:
    def __init__(self, store: Store, index: Index, memory: MemoryFile, memory_dir: Path,
                 archive_dir: Path | None = None, embed: Embedder | None = None) -> None:
        self.store = store
        self.index = index  # the search index the daemon built (local or the fleet's)
        self.memory = memory
        self.memory_dir = memory_dir
        self.archive_dir = archive_dir  # what retention moved there is recalled too
        self.embed = embed  # local embeddings when on (`memoryd.embed`); None: lexical

    async def build(self, req: ContextRequest) -> dict[str, Any]:
        RELEASE.touch()  # what this loads (the tokenizer, index pages) goes when idle
        # no search hands its parts to the index's helper while a context runs
        # (`memoryd.index.helper`)
        with self.index.helper.asking():
            return await self._build(req)

    async def _build(self, req: ContextRequest) -> dict[str, Any]:
        include = include_of(req)
        query = (req.query or "").strip()

        # MEMORY.md and the daily notes are read while the reader recalls; the reader
        # then waits for them (they are local files: done long before the recall) and
        # fits the block itself, so the pack comes back in one trip to a thread. Under
        # load each hop to a thread waits its turn: a second trip, to fit the block
        # (the tokenizer runs many times: never on the loop), cost a core's wait more.
        files: Future[tuple[LongTerm, Section]] = Future()
        local = asyncio.ensure_future(self._files(query, include))
        local.add_done_callback(lambda t: _hand_over(t, files))

        # the units nearest the query by meaning, asked on the reader thread; None:
        # recall is lexical
        vq = vector_query(self.embed, query) if "recalled" in include else None

        def from_store(c: sqlite3.Connection) -> dict[str, Any]:
            root, session, recalled = self._from_store(c, req, query, include, vq)
            lt, daily = files.result(timeout=FILES_WAIT_S)
            return self._fit(req, root, session, recalled, lt, daily)

        try:  # in fleet mode from this machine's row cache once the index is ready
            pack, stale = await read_rows(self.store, self.index, from_store)
            if stale:  # complete as of the last change this machine applied
                pack["stale"], pack["store"] = True, "unreachable"
            return pack
        except StoreUnavailableError:  # fleet mode, the database away: MEMORY.md and
            pass  # the notes are local files; recall ranks on the local index
        except BaseException:
            local.cancel()  # nothing waits for it now (or it failed: the error raised)
            if local.done() and not local.cancelled():
                local.exception()
            raise
        root = await asyncio.to_thread(git_root, req.cwd) if req.cwd else None
        recalled = await self._recalled_offline(req, query, root, include)
        lt, daily = await local
        pack = await asyncio.to_thread(self._fit, req, root, None, recalled, lt, daily)
        pack["stale"], pack["store"] = True, "unreachable"
        return pack

    async def _files(self, query: str, include: set[str]) -> tuple[LongTerm, Section]:
        """MEMORY.md's section and the daily notes', read at the same time (when the notes
        are not asked for, their section is made here: no tasks to gather)."""
        if "daily" not in include and not (query and RECENT_TIME.search(query)):
            return await self._long_term(query, include), await self._daily(include, query)
        lt, daily = await asyncio.gather(self._long_term(query, include),
                                         self._daily(include, query))
        return lt, daily

    def _fit(self, req: ContextRequest, root: str | None, session: dict[str, Any] | None,
             recalled: Section, lt: LongTerm, daily: Section) -> dict[str, Any]:
        """The sections fitted into the budget and rendered (a thread's work: the
        tokenizer, and the long-term order)."""
        _scope_long_term(lt, (req.query or "").strip(), root)
        sections = {
            "session_summary": self._summary_section(req, session, include_of(req)),
            "long_term": lt.section,
            "recalled": recalled,
            "daily": daily,
        }
        return self._assemble(req, sections, root)

    def _from_store(self, conn: sqlite3.Connection, req: ContextRequest, query: str,
                    include: set[str], vq: Any = None
                    ) -> tuple[str | None, dict[str, Any] | None, Section]:
        """(the project's git root, the asking session, the recalled section), on the
        store's reader thread."""
        root = git_root(req.cwd) if req.cwd else None
        session = _session(conn, req.session_id, req.agent) if req.session_id else None
        return root, session, self._recalled(conn, req, query, root, session, include, vq)

    async def _recalled_offline(self, req: ContextRequest, query: str, root: str | None,
                                include: set[str]) -> Section:
        s = Section("recalled", "Recalled from past sessions")
        if "recalled" not in include or not query:
            s.reason = "not included" if "recalled" not in include else "no query given"
            return s
        total, hits = await asyncio.to_thread(offline_hits, self.index, self.index.recent,
                                              query, k=req.max_recalled)
        for h in hits:
            s.items.append(_hit_item(h, root))
        s.reason = stale_note(self.store.health.status(), total, len(hits))
        return s

    # -- gathering ------------------------------------------------------------------------

    @staticmethod
    def _summary_section(req: ContextRequest, session: dict[str, Any] | None,
                         include: set[str]) -> Section:
        s = Section("session_summary", "This session so far (summary)")
        if "session_summary" not in include:
            s.reason = "not included"
        elif not req.session_id:
            s.reason = "no session_id given"
        elif session is None:
            s.reason = "session not known to memoryd (yet)"
        elif not session["summary"]:
            s.reason = "no summary yet (the session is short or not summarized)"
        else:
            s.items.append({"text": session["summary"], "covers_upto_seq":
                            session["summary_upto"], "made_by": session["summary_by"],
                            "_body": session["summary"]})
        return s

    async def _long_term(self, query: str, include: set[str]) -> LongTerm:
        """MEMORY.md as read and, with embeddings, each entry's cosine with the query
        (ranked once the project is known: `_scope_long_term`)."""
        s = Section("long_term", "Long-term memory")
        if "long_term" not in include:
            s.reason = "not included"
            return LongTerm(s)
        # one snapshot for both lists: each read of the file is a lock and a thread hop,
        # which under load queue behind ingest's work for hundreds of milliseconds
        doc = await self.memory.document()
        near = None  # each entry's cosine with the query, by line, with embeddings
        if self.embed is not None and query.strip() and doc.entries:
            got = await asyncio.to_thread(self.embed.entry_cosines, query,
                                          [long_term.text_of(e) for e in doc.entries])
            near = None if got is None else {doc.entries[i].line: c for i, c in got.items()}
        return LongTerm(s, doc, near)

    def _recalled(self, conn: sqlite3.Connection, req: ContextRequest, query: str,
                  root: str | None, session: dict[str, Any] | None,
                  include: set[str], vq: Any = None) -> Section:
        s = Section("recalled", "Recalled from past sessions")
        if "recalled" not in include:
            s.reason = "not included"
            return s
        if not query:
            s.reason = "no query given"
            return s
        exclude = None
        if session is not None:
            # what the asking agent still has in its window: everything after the summary
            exclude = (req.session_id, session["next_seq"] - 1 - session["summary_upto"])
        k = req.max_recalled
        index = self.index
        hits: list[Hit] = []
        if root:  # this project first ...
            hits = retrieve_sync(conn, index, query, k=k, prefer_project=root,
                                 project_within=root, exclude_session_recent=exclude,
                                 vq=vq).hits
        if len(hits) < k:  # ... then everything else
            seen = {h.unit_id for h in hits}
            more = retrieve_sync(conn, index, query, k=k + len(hits), prefer_project=root,
                                 exclude_session_recent=exclude, vq=vq)
            hits += [h for h in more.hits if h.unit_id not in seen][: k - len(hits)]
        self.index.recent.remember(hits)
        for h in hits:
            s.items.append(_hit_item(h, root))
        if len(hits) < k:  # what retention archived fills the rest (memoryd.recall.archived)
            _, found = archive_recall.find(self.archive_dir, plan_query(query).terms, "or",
                                           k - len(hits))
            s.items += [_archived_item(r, root) for r in found]
        if not s.items:
            s.reason = ("nothing in past sessions matches the query"
                        if plan_query(query).match else "the query has no searchable words")
        return s

    async def _daily(self, include: set[str], query: str = "") -> Section:
        s = Section("daily", "Recent daily notes")
        asked = RECENT_TIME.search(query) if query else None
        if "daily" not in include and asked is None:
            s.reason = "not asked for (include=daily, or a query about a recent time)"
            return s
        week = asked is not None and WEEK.search(asked.group()) is not None
        notes = await asyncio.to_thread(_read_daily, self.memory_dir, 7 if week else 3)
        for day, text in notes:
            s.items.append({"date": day, "text": text, "why": "recent daily note",
                            "_head": f"### {day}\n"})
        if not s.items:
            s.reason = "no daily notes yet"
        return s

    # -- fitting ---------------------------------------------------------------------------

    def _assemble(self, req: ContextRequest, sections: dict[str, Section],
                  root: str | None) -> dict[str, Any]:
        budget = req.budget_tokens
        cut: list[dict[str, Any]] = []
        frame = count_fixed(OPEN + CLOSE) + 2
        left = budget - frame
        # each section's text, as the pieces it is joined from: the block is counted from
        # them (`Counts.joined`), every item's text encoded once, here
        parts: list[list[str]] = []
        counts = Counts()
        order = ["session_summary", "long_term", "recalled", "daily"]
        for name in order:
            sec = sections[name]
            if not sec.items:
                continue
            cap = left if name == "recalled" else min(left, int(budget * SHARES[name]))
            if name == "recalled" and sections["daily"].items:
                cap = min(left, int(left * 0.75))
            heading = f"\n## {sec.title}\n"
            htok = count_fixed(heading)
            if cap - htok < MIN_ITEM_TOKENS:
                cut += [_cut(name, i, "no room left in the budget") for i in sec.items]
                sec.items, sec.reason = [], "cut: no room left in the budget"
                continue
            room = cap - htok
            kept = []
            for item in sec.items:
                # what is inside the fence must not spell its tag (memoryd.recall.fence)
                head = defuse(item.pop("_head", ""))
                body = defuse(item.pop("_body", item.get("text", "")))
                head_tokens = counts.joined([head, "\n"])
                space = room - head_tokens
                if space < MIN_ITEM_TOKENS:
                    cut.append(_cut(name, item, "over the section's share of the budget"))
                    continue
                body, trimmed, body_tokens = fit_counted(body, space, counts)
                # the head's and the body's counts: joining them can only merge tokens
                # (at most over by one); the rendered total below is counted exactly
                tokens = head_tokens + body_tokens
                if tokens > room:
                    cut.append(_cut(name, item, "over the section's share of the budget"))
                    continue
                if trimmed:
                    cut.append({"section": name, "what": _what(item), "reason": "trimmed to fit"})
                    item["content" if "content" in item else "text"] = body
                item["tokens"], item["trimmed"] = tokens, trimmed
                kept.append((item, [head, body]))
                room -= tokens
            if kept:
                parts.append([heading, *(x for _, t in kept for x in (*t, "\n"))])
                left -= htok + sum(i["tokens"] for i, _ in kept)
            sec.items = [i for i, _ in kept]
        block = [OPEN, *(x for p in parts for x in p), CLOSE] if parts else []
        total = counts.joined(block)
        while total > budget and parts:  # tokenizer merges across joins: shave the tail
            parts.pop()
            block = [OPEN, *(x for p in parts for x in p), CLOSE] if parts else []
            total = counts.joined(block)
            cut.append({"section": "*", "what": "last section", "reason": "budget safety margin"})
        out: dict[str, Any] = {
            "budget_tokens": budget, "total_tokens": total, "project": root,
            "rendered": "".join(block), "cut": cut,
            "sections": {n: {"tokens": s.tokens, "items": len(s.items), "reason": s.reason}
                         for n, s in sections.items()},
        }
        for n, s in sections.items():
            out[n] = s.items[0] if n == "session_summary" and s.items else (
                None if n == "session_summary" else s.items)
        return out


def _hand_over(task: asyncio.Task[Any], out: Future[Any]) -> None:
    """The task's outcome to a thread's future (a cancelled task cancels it: the thread
    waiting on it never waits out its timeout)."""
    if out.done():
        return
    if task.cancelled():
        out.cancel()
    elif (e := task.exception()) is not None:
        out.set_exception(e)
    else:
        out.set_result(task.result())


def _session(conn: sqlite3.Connection, session_id: str | None,
             agent: str | None) -> dict[str, Any] | None:
    if not session_id:
        return None
    sql = ("SELECT agent, session_id, project, summary, summary_upto, summary_by, next_seq "
           "FROM sessions WHERE session_id = ?")
    args: list[Any] = [session_id]
    if agent:
        sql += " AND agent = ?"
        args.append(agent)
    row = conn.execute(sql + " ORDER BY last_ts DESC NULLS LAST LIMIT 1", args).fetchone()
    return dict(row) if row else None


# a query about a recent time reads the daily notes
RECENT_TIME = re.compile(r"\b(?:yesterday|today|last (?:week|few days|night)|this week|"
                         r"recently|the other day|earlier this week)\b|昨天|前天|今天|上周|"
                         r"这周|本周|最近|上个星期|这几天", re.IGNORECASE)
WEEK = re.compile(r"week|周|星期", re.IGNORECASE)


def _project(e: Entry) -> str | None:
    """The project of a project entry (`agent:project` source), None for user-wide."""
    _, sep, project = e.source.partition(":")
    return project if sep and project else None


def _scope_long_term(lt: LongTerm, query: str, root: str | None) -> None:
    """The section's entries: user-wide ones everywhere, a project's (source
    `agent:project`) only in that project, ranked among themselves
    (`memoryd.recall.long_term`: an entry of another project takes no place among the
    best matches); relevant ones first, this project's before the rest."""
    s, doc = lt.section, lt.doc
    if doc is None:
        return
    here = os.path.basename(root.rstrip("/")) if root else None
    mine = replace(doc, entries=tuple(e for e in doc.entries if _project(e) in (None, here)))
    scoped = [(e, why + (" (this project)" if _project(e) else ""))
              for e, why in long_term.ranked(mine, query, lt.near)]
    scoped.sort(key=lambda ew: (ew[1].startswith("recent"), _project(ew[0]) is None))
    for e, why in scoped:
        s.items.append(_entry_item(e, why))
    if not s.items:
        s.reason = "MEMORY.md has no entries"


def _entry_item(e: Entry, why: str) -> dict[str, Any]:
    return {"line": e.line, "date": e.date, "source": e.source, "items": list(e.items),
            "why": why, "_body": f"- {e.date} ({e.source}): {'；'.join(e.items)}"}


def _hit_item(h: Hit, root: str | None) -> dict[str, Any]:
    cross = bool(root) and not in_project(h.project, root)
    head = (f"### {label(h)} — {h.agent} · {h.project or 'no project'} · session "
            f"{h.session_id} · turn {h.turn} · {_when(h.ts)}"
            + (" · other project" if cross else ""))
    why = ", ".join(h.matched) or "-"
    return {
        "unit_id": h.unit_id, "record_id": h.record_id, "agent": h.agent,
        "project": h.project, "session_id": h.session_id, "turn": h.turn, "seq": h.seq,
        "ts": h.ts, "role": h.role, "kind": h.kind, "label": label(h), "content": h.content,
        "score": round(h.score, 4), "cross_project": cross,
        "why": {"terms": h.matched, "signals": h.signals},
        "provenance": {"session_id": h.session_id, "path": h.path, "offset": h.offset},
        "_head": f"{head}\n(matched: {why})\n",
        "_body": h.content,
    }


def _archived_item(r: dict[str, Any], root: str | None) -> dict[str, Any]:
    """A unit retention moved to the archive, recalled as `_hit_item` recalls one in the
    store (it has no unit id any more: `archived` names its archive file's month)."""
    cross = bool(root) and not in_project(r.get("project"), root)
    what = label_of(r["kind"], r["role"], r.get("tool_name"))
    content = str(r.get("content") or "")
    head = (f"### {what} — {r['agent']} · {r.get('project') or 'no project'} · session "
            f"{r['session_id']} · turn {r.get('turn')} · {_when(r.get('ts'))} · archived"
            + (" · other project" if cross else ""))
    return {
        "unit_id": None, "archived": r["month"], "record_id": str(r["record_id"]),
        "agent": r["agent"], "project": r.get("project"), "session_id": r["session_id"],
        "turn": r.get("turn"), "seq": r.get("seq"), "ts": r.get("ts"), "role": r["role"],
        "kind": r["kind"], "label": what, "content": content, "score": 0.0,
        "cross_project": cross, "why": {"terms": r["matched"], "signals": ["archive"]},
        "provenance": {"session_id": r["session_id"], "path": None, "offset": r.get("offset"),
                       "archive": r["month"]},
        "_head": f"{head}\n(matched: {', '.join(r['matched'])})\n",
        "_body": content,
    }


def _what(item: dict[str, Any]) -> str:
    if item.get("archived"):
        return f"archived unit ({item['session_id']} turn {item['turn']}, {item['archived']})"
    if "unit_id" in item:
        return f"unit {item['unit_id']} ({item['session_id']} turn {item['turn']})"
    if "line" in item:
        return f"MEMORY.md line {item['line']}"
    return item.get("date") or "summary"


def _cut(section: str, item: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"section": section, "what": _what(item), "reason": reason}


def _read_daily(memory_dir: Path, n: int) -> list[tuple[str, str]]:
    try:
        files = sorted(memory_dir.glob("????-??-??.md"), reverse=True)[:n]
    except OSError:
        return []
    return [(f.stem, f.read_text(encoding="utf-8", errors="replace")) for f in files]
