"""The search index: tantivy for retrieval, derived from SQLite and rebuildable.

`SearchIndex` owns one tantivy index directory and the thread that writes it
(`memoryd.index.indexer`), and the live tail (`memoryd.index.tail`): what the writer added
since its last commit, searched beside the index so a unit is found before any commit.
Readers ask it for ranked candidates, which query terms a unit matches and per-field
scores; filters run inside the index. A missing, corrupt or
older-schema index is rebuilt in the background; meanwhile `state` is "rebuilding" and
searches fall back to a scan of recent units (`memoryd.index.fallback`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import tantivy

from memoryd.idle_release import RELEASE
from memoryd.index import fallback, maxscore, pages
from memoryd.index.bm25 import Combined, MainStats, main_stats
from memoryd.index.indexer import Indexer
from memoryd.index.query import (
    Filters,
    estimate,
    filter_clauses,
    ids_query,
    match_query,
    restricted,
    sessions_clause,
    term_tokens,
    text_query,
)
from memoryd.index.schema import ANALYZER, SCHEMA_VERSION, build_analyzer, build_schema
from memoryd.index.tail import Tail, TailPolicy
from memoryd.index.text import index_text, is_cjk

__all__ = ["Filters", "SearchIndex"]

log = logging.getLogger(__name__)

RANK_FIELDS = ("unit_id", "session_pk", "seq", "ts", "speaker", "dup", "chars")
"""The fast fields `ranked` reads for each candidate (`chars` last: `_chars`)."""
MASK_TERMS = 20  # terms matched per search in `matched_ids` (f32: 24 exact bits)
WRITER_HEAP = 32_000_000
"""The writer's memory budget (one indexing thread). tantivy sizes each new segment's
term table from it (a third of the budget): at 16 MB (its floor is 15) the table is half
the size it gets from 32 MB on, and indexing a backfill's text took ~40% more CPU on
tantivy's thread (1.83 -> 1.26 s for 30k units, a commit per 5,000; no gain above 32 MB;
bench/README, branch `bidx`). The arena fills only as documents come: a live append's
writer holds little."""
META = "memoryd-index.json"
SESSION_CLAUSES = 64  # session-set filter clauses kept (`_sessions_clause`)


class SearchIndex:
    def __init__(self, root: Path, db_path: Path, connect: Any = None) -> None:
        self.root = root
        self.db_path = db_path
        # a read connection of the index's own (the store's engine gives one)
        self.connect = connect or (lambda: _connect_ro(db_path))
        self.schema = build_schema()
        self.analyzer = build_analyzer()
        self.state = "rebuilding"
        self.upto = 0              # the largest unit id in the index
        self.pending_done = 0      # the last index_pending row the index has committed
        self._index: tantivy.Index | None = None
        self._writer: Any = None
        self._rebuild = threading.Event()
        self._lock = threading.Lock()  # swaps of the index object
        self._indexer: Any = None  # Indexer, or the fleet's FeedIndexer
        self.tail = Tail(self.analyzer)  # added since the last commit: searched beside it
        self.tail_policy = TailPolicy.from_env()
        self._stats: MainStats | None = None  # the committed index's BM25 statistics
        self.force_prune = False  # tests: prune top-k searches whenever possible, cost aside
        self._session_clauses: dict[tuple[int, ...], tantivy.Query] = {}
        self._gen = 0  # the searchers' generation: one more at every reload or reset

    # -- life cycle ---------------------------------------------------------------------

    def open(self, clear_pending: Any) -> None:
        """Open the index on disk, or start over when it is missing, corrupt or of
        another schema; then start the writer thread (it catches up from SQLite)."""
        self.root.mkdir(parents=True, exist_ok=True)
        meta = self._read_meta()
        tdir = self.root / "tantivy"
        if meta.get("schema") == SCHEMA_VERSION and tantivy.Index.exists(str(tdir)):
            try:
                idx = tantivy.Index.open(str(tdir))
                idx.register_tokenizer(ANALYZER, self.analyzer)
                idx.config_reader(reload_policy="Manual")
                self._index = idx
                self.upto = self._max_unit_id()
                self.state = "ready" if meta.get("complete") else "rebuilding"
                if self.upto > self._db_max_unit_id():
                    # ahead of the database (restored from a backup, or a new one): its
                    # ids mean other units now
                    log.warning("search index at %s is ahead of the database: rebuilding",
                                tdir)
                    self._index = None
            except (ValueError, OSError) as e:
                log.warning("search index at %s unreadable (%s): rebuilding", tdir, e)
                self._index = None
        if self._index is None:
            self.reset()
        self._indexer = self._new_indexer(clear_pending)
        self._indexer.start()
        RELEASE.register(self.release_pages)

    def _new_indexer(self, clear_pending: Any) -> Any:
        """The writer thread (fleet mode follows the change feed instead:
        `memoryd.fleet.follow_index`)."""
        return Indexer(self, clear_pending)

    def close(self) -> None:
        RELEASE.unregister(self.release_pages)
        if self._indexer is not None:
            self._indexer.stop()
            self._indexer = None

    def reset(self) -> None:
        """Start an empty index (writer thread or open only): a full rebuild follows."""
        self._rebuild.clear()
        self.close_writer()
        tdir = self.root / "tantivy"
        with self.tail.lock, self._lock:
            self.tail.clear()
            self._stats = None
            self.state = "rebuilding"
            self._write_meta(complete=False)
            self._index = None
            shutil.rmtree(tdir, ignore_errors=True)
            tdir.mkdir(parents=True)
            idx = tantivy.Index(self.schema, path=str(tdir))
            idx.register_tokenizer(ANALYZER, self.analyzer)
            idx.config_reader(reload_policy="Manual")  # reloaded on our commits only
            self._index = idx
            self._gen += 1
            self.upto = 0
        log.info("search index: rebuilding from the database")

    def request_rebuild(self) -> None:
        """Rebuild from SQLite in the background (`memoryctl reindex`)."""
        self.state = "rebuilding"
        self._rebuild.set()
        self.notify_write()

    # -- the writer thread's side -------------------------------------------------------

    def rebuild_requested(self) -> bool:
        return self._rebuild.is_set()

    def writer(self) -> Any:
        if self._writer is None:
            with self._lock:  # not while release_pages reads the mappings
                assert self._index is not None
                self._writer = self._index.writer(heap_size=WRITER_HEAP, num_threads=1)
        return self._writer

    def close_writer(self) -> None:
        """Let go of the writer and its memory arena (when idle and on close)."""
        w, self._writer = self._writer, None
        if w is not None:
            w.wait_merging_threads()

    def committed(self) -> None:
        """A commit is done: searchers reload and the tail (now in the index) empties,
        together for readers (`Tail.lock`)."""
        with self.tail.lock, self._lock:  # a reload unmaps merged-away segments
            assert self._index is not None
            self._index.reload()
            self._gen += 1
            self.tail.committed()  # what came while the commit ran stays
            self._stats = None

    def commit_due(self) -> float | None:
        """Whether the tail should be committed now (0), in how many seconds, or None
        when it is empty (`TailPolicy`)."""
        t, pol = self.tail, self.tail_policy
        if not t.docs and not t.replaced:
            return None
        if len(t.docs) >= pol.docs:
            return 0.0
        return max(0.0, pol.seconds - t.age())

    def release_pages(self) -> int:
        """Drop the index pages searches mapped in from this process's RSS (they stay in
        the OS page cache: the next search maps them back cheaply). Only while no writer
        is open and under the lock, so no index file is unmapped meanwhile. Bytes let go."""
        with self._lock:
            if self._writer is not None or self._index is None:
                return 0
            return pages.release(self.root)

    def has_writer(self) -> bool:
        return self._writer is not None

    def caught_up(self, *, keep_writer: bool = False) -> None:
        """The writer found nothing more to do: a rebuild is complete, the writer's
        memory can go (now, or when the writer thread has been idle a while)."""
        if not keep_writer:
            self.close_writer()
        if self.state == "rebuilding" and not self._rebuild.is_set():
            self._write_meta(complete=True)
            self.state = "ready"
            log.info("search index: ready (%d units)", self.docs())

    def ids_query(self, ids: list[int]) -> tantivy.Query:
        return ids_query(self.schema, ids)

    # -- the store's side ---------------------------------------------------------------

    def notify_write(self) -> None:
        """The store committed a write: the index may have something to follow."""
        if self._indexer is not None:
            self._indexer.wake()

    def is_caught_up(self, conn: sqlite3.Connection) -> bool:
        """Everything committed to the database (as `conn` sees it) is searchable: the
        newest unit is indexed and no change waits in `index_pending`. Two index seeks."""
        if self.state != "ready":
            return False
        top = conn.execute("SELECT coalesce(max(id), 0) FROM units").fetchone()[0]
        if top > self.upto:
            return False
        return conn.execute("SELECT NOT EXISTS (SELECT 1 FROM index_pending WHERE id > ?)",
                            (self.pending_done,)).fetchone()[0] == 1

    def status(self, conn: sqlite3.Connection) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "units": self.docs(), "upto": self.upto,
                               "caught_up": self.is_caught_up(conn),
                               "tail": len(self.tail),
                               "commits": getattr(self._indexer, "commits", 0),
                               "wakes": getattr(self._indexer, "wakes", 0)}
        if self._indexer is not None and self._indexer.error:
            out["error"] = self._indexer.error
        return out

    # -- readers ------------------------------------------------------------------------

    def docs(self) -> int:
        """Units searchable: committed, plus the tail's new ones, less the committed ones
        the tail deleted."""
        idx = self._index
        if idx is None:
            return 0
        with self.tail.lock:
            s, t = idx.searcher(), self.tail
            gone = 0
            if t.replaced:  # those of them the index holds
                gone = s.search(ids_query(self.schema, sorted(t.replaced)), 1,
                                count=True).count or 0
            return s.num_docs - gone + len(t.docs)

    def _view(self, idx: tantivy.Index, terms: list[str]
              ) -> tuple[tantivy.Searcher, MainStats | None]:
        """The searcher, and the index's statistics when the tail has anything (call
        with `tail.lock` held: the searcher and the tail from the same side of a commit;
        `terms`: the query's, whose rarest token reads the statistics cheaply)."""
        s = idx.searcher()
        if not self.tail.docs:
            return s, None
        return s, self._main_stats(s, terms)

    def _main_stats(self, s: tantivy.Searcher, terms: list[str]) -> MainStats:
        """The committed index's BM25 statistics (call with `tail.lock` held: kept until
        the next commit or reset)."""
        if self._stats is None:
            probes = [x for t in terms if not is_cjk(t) or len(t) > 1
                      for x in term_tokens(self.analyzer, t)]
            self._stats = main_stats(s, self.schema, (*probes, *self.tail.last_tokens))
        return self._stats

    def searchable(self) -> bool:
        return self.state == "ready" and self._index is not None

    def backlog(self) -> bool:
        """Whether background jobs should wait for this index (`Daemon._jobs_wait`):
        never here, as a daemon's own index keeps up with its backfill (a fleet member's
        follows the shared store after it: `FleetIndex.backlog`)."""
        return False

    def candidates(self, conn: sqlite3.Connection, terms: list[str], f: Filters, *,
                   mode: str, limit: int, count: bool, w_body: float = 1.0,
                   w_one_liner: float = 3.0) -> tuple[int, list[tuple[int, float]]]:
        """(matches, [(unit id, score)] best first) for the terms under the filters."""
        got = self.ranked(conn, terms, f, mode=mode, limit=limit, count=count,
                          w_body=w_body, w_one_liner=w_one_liner)
        if got is None:
            return fallback.scan(conn, terms, f, mode=mode, limit=limit)
        return got[0], [(c["unit_id"], c["bm25"]) for c in got[1]]

    def ranked(self, conn: sqlite3.Connection, terms: list[str], f: Filters, *,
               mode: str, limit: int, count: bool, w_body: float = 1.0,
               w_one_liner: float = 3.0) -> tuple[int, list[dict[str, Any]], bool] | None:
        """(matches, candidates best first, whether matches is an estimate), each
        candidate what reranking needs, read from the index's fast fields (`RANK_FIELDS`)
        with its score as `bm25`: no SQLite row is read. A big unfiltered OR search's
        matches are estimated (`memoryd.index.query.estimate`). None while the index is
        not searchable (`candidates` falls back)."""
        idx = self._index
        if not self.searchable() or idx is None:
            return None
        pks = None
        if f.by_session():
            pks = session_pks(conn, f)
            if not pks:
                return 0, [], False
        with self.tail.lock:
            s, stats = self._view(idx, terms)
            gen = self._gen
            replaced = set(self.tail.replaced)
            live: list[dict[str, Any]] = []
            scoring: Any = s  # the searcher text_query reads frequencies from
            boost = None
            if stats is not None:
                plan = self.tail.plan(s, stats, terms, w_body=w_body,
                                      w_one_liner=w_one_liner)
                live = self.tail.search(plan, f, pks, mode)
                c = Combined(s, self.tail, stats)  # the index scored as after the commit
                scoring, boost = c, c.boost
            q = text_query(self.schema, self.analyzer, scoring, terms, mode, w_body=w_body,
                           w_one_liner=w_one_liner, boost=boost)
            if q is None:
                return 0, [], False
            clauses = filter_clauses(self.schema, f, pks,
                                     self._sessions_clause(pks) if pks is not None else None)
            guess = estimate(s, self.analyzer, terms, mode) if count and not clauses else None
            exact = count and guess is None
            prune = mode == "or" and not exact and len(terms) > 1
            if prune:  # the top k without scoring every match
                body, always = maxscore.parts(
                    self.schema, self.analyzer, scoring, s, terms,
                    n_docs=(stats or self._main_stats(s, terms)).docs, w_body=w_body,
                    w_one_liner=w_one_liner, boost=boost)
        hits = maxscore.top(s, body, always, clauses, limit + len(replaced),
                            force=self.force_prune) if prune else None
        res_count = None
        if hits is None:
            res = s.search(restricted(q, clauses), limit + len(replaced), count=exact)
            hits, res_count = res.hits, res.count
        addrs = [a for _, a in hits]
        cols = [s.fast_field_values(name, addrs) for name in RANK_FIELDS[:-1]]
        cols.append(_chars(s, addrs, cols[RANK_FIELDS.index("dup")], every=bool(live)))
        found = [dict(zip(RANK_FIELDS, vals, strict=True), bm25=float(sc), at=(s, a, gen))
                 for (sc, a), *vals in zip(hits, *cols, strict=True)]
        if replaced or live:
            found, gone = merge(found, live, replaced, limit)
        else:
            gone = 0
        if guess is not None:
            return max(guess + len(live), len(found)), found, True
        total = res_count if exact and res_count is not None else len(found)
        return (max(total + len(live) - gone, len(found)) if exact else len(found)), found, False

    def _sessions_clause(self, pks: list[int]) -> tantivy.Query:
        """The filter clause of a set of sessions, built once: a context asks for its
        project's sessions on every request (a query object holds no documents: it stays
        right across commits and reloads)."""
        key = tuple(pks)
        q = self._session_clauses.get(key)
        if q is None:
            if len(self._session_clauses) >= SESSION_CLAUSES:
                self._session_clauses.clear()
            q = self._session_clauses[key] = sessions_clause(self.schema, pks)
        return q

    def matched_ids(self, terms: list[str], ids: list[int], at: dict[int, At] | None = None
                    ) -> dict[int, set[int]]:
        """Which of `terms` (by index) each of the given units matches in its body or
        one-liner, asked of the index: exactly what retrieval matched, with no text
        analyzed here. One search for up to `MASK_TERMS` terms: term i scores a constant
        2**i, so a unit's score is the bit set of the terms it matches (sums of distinct
        powers of two below 2**24 are exact in tantivy's f32 scores).

        `at`: where `ranked` found units (its candidates' "at"). When it found all of
        these in one searcher, that searcher is asked and the hits' addresses say which
        unit each is: no read of the `unit_id` fast field, whose reader costs ~50 µs a
        call at 1M units whatever the addresses (~20 at 200k)."""
        idx = self._index
        if not ids or not self.searchable() or idx is None:
            return {}
        if (held := _held(ids, at)) is not None:
            return _masked(self, held[0], terms, ids, held[2])
        out: dict[int, set[int]] = {}
        with self.tail.lock:
            s, stats = self._view(idx, terms)
            t = self.tail
            if stats is not None:
                out = t.matched(t.plan(s, stats, terms, w_body=1.0, w_one_liner=1.0), ids)
            ids = t.others(ids)
        if not ids:
            return out
        got = _masked(self, s, terms, ids, _unit_ids(s))
        for u, bits in got.items():
            out.setdefault(u, set()).update(bits)
        return out

    def matched(self, terms: list[str], texts: dict[int, str]) -> dict[int, set[int]]:
        """Which of `terms` (by index) each text (unit id -> content and one-liner)
        contains, by the index's own analysis (a phrase: all of its tokens; a single CJK
        character: as a prefix). For the fallback scan, when the index cannot answer."""
        wanted = [(i, term_tokens(self.analyzer, t), is_cjk(t) and len(t) == 1)
                  for i, t in enumerate(terms)]
        out: dict[int, set[int]] = {}
        for uid, text in texts.items():
            have = set(self.analyzer.analyze(index_text(text)))
            got = set()
            for i, tokens, prefix in wanted:
                if prefix:
                    if any(h.startswith(tokens[0]) for h in have):
                        got.add(i)
                elif tokens and all(t in have for t in tokens):
                    got.add(i)
            out[uid] = got
        return out

    def field_scores(self, terms: list[str], ids: list[int], *, w_body: float = 1.0,
                     w_one_liner: float = 3.0, at: dict[int, At] | None = None
                     ) -> dict[int, tuple[float, float]]:
        """(body score, one-liner score) of those of the given units whose one-liner
        matches (for the others the body score is the whole score). `at`: as for
        `matched_ids`, used while no commit came since `ranked` (the scores are the
        present searcher's)."""
        idx = self._index
        if not ids or not self.searchable() or idx is None:
            return {}
        live: dict[int, tuple[float, float]] = {}
        with self.tail.lock:
            s, stats = self._view(idx, terms)
            held = _held(ids, at)
            if held is not None and held[1] == self._gen:
                s, unit_ids = held[0], held[2]  # the same segments as the present one
            else:
                unit_ids = _unit_ids(s)
            t = self.tail
            if stats is not None:
                live = t.field_scores(t.plan(s, stats, terms, w_body=w_body,
                                             w_one_liner=w_one_liner), ids)
            ids = t.others(ids)
            c = Combined(s, t, stats) if stats is not None else None
            qs = {fs: text_query(self.schema, self.analyzer, c or s, terms, w_body=w_body,
                                 w_one_liner=w_one_liner, fields=fs,
                                 boost=c.boost if c else None)
                  for fs in (("one_liner",), ("body",))}
        if not ids:
            return live
        only = [(tantivy.Occur.Must, ids_query(self.schema, ids))]

        def scores(fields: tuple[str, ...]) -> dict[int, float]:
            q = qs[fields]
            if q is None:
                return {}
            res = s.search(restricted(q, only), len(ids), count=False)
            uids = unit_ids([a for _, a in res.hits])
            return {u: float(sc) for u, (sc, _) in zip(uids, res.hits, strict=True)}

        one = scores(("one_liner",))
        if not one:
            return live
        body = scores(("body",))
        return {**{u: (body.get(u, 0.0), sc) for u, sc in one.items()}, **live}

    # -- meta ---------------------------------------------------------------------------

    def _max_unit_id(self) -> int:
        assert self._index is not None
        s = self._index.searcher()
        if not s.num_docs:
            return 0
        res = s.search(tantivy.Query.all_query(), 1, count=False, order_by_field="unit_id",
                       order=tantivy.Order.Desc)
        return int(s.fast_field_values("unit_id", [res.hits[0][1]])[0])

    def _db_max_unit_id(self) -> int:
        conn = self.connect()
        try:
            return int(conn.execute("SELECT coalesce(max(id), 0) FROM units").fetchone()[0])
        finally:
            conn.close()

    def _read_meta(self) -> dict[str, Any]:
        try:
            meta = json.loads((self.root / META).read_text())
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def _write_meta(self, *, complete: bool) -> None:
        tmp = self.root / (META + ".tmp")
        tmp.write_text(json.dumps({"schema": SCHEMA_VERSION, "complete": complete}))
        os.replace(tmp, self.root / META)


def _connect_ro(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                           check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=10000")
    conn.row_factory = sqlite3.Row
    return conn


def _chars(s: tantivy.Searcher, addrs: list[Any], dups: list[int], *, every: bool
           ) -> list[int]:
    """The `chars` of the candidates: read only for those another candidate shares a
    near-duplicate key with (the only ones `retrieval._dedupe` compares lengths of; the
    others 0), or for all (`every`: the tail's candidates join them). Most searches then
    read one fast field less."""
    if every:
        return s.fast_field_values("chars", addrs)
    seen: set[int] = set()
    twins = {d for d in dups if d and (d in seen or seen.add(d))}
    if not twins:
        return [0] * len(addrs)
    at = [i for i, d in enumerate(dups) if d in twins]
    out = [0] * len(addrs)
    for i, n in zip(at, s.fast_field_values("chars", [addrs[i] for i in at]), strict=True):
        out[i] = n
    return out


At = tuple[tantivy.Searcher, tantivy.DocAddress, int]
"""Where `ranked` found a unit: the searcher, the address in it, the searchers'
generation then (`SearchIndex._gen`)."""
UnitIds = Callable[[list[tantivy.DocAddress]], list[int]]
"""The unit id of each of a list of addresses (of one searcher)."""


def _unit_ids(s: tantivy.Searcher) -> UnitIds:
    """Unit ids by address from the `unit_id` fast field."""
    return lambda addrs: [int(u) for u in s.fast_field_values("unit_id", addrs)]


def _held(ids: list[int], at: dict[int, At] | None
          ) -> tuple[tantivy.Searcher, int, UnitIds] | None:
    """When `ranked` found all of `ids` in one searcher: that searcher, its generation,
    and unit ids by address from what `ranked` found (no fast-field read); else None."""
    found = [at.get(i) for i in ids] if at else []
    if not found or any(f is None or f[0] is not found[0][0] for f in found):
        return None
    where = {(f[1].segment_ord, f[1].doc): u for u, f in zip(ids, found, strict=True)}
    return found[0][0], found[0][2], lambda addrs: [
        where[(a.segment_ord, a.doc)] for a in addrs]


def _masked(ix: SearchIndex, s: tantivy.Searcher, terms: list[str], ids: list[int],
            unit_ids: UnitIds) -> dict[int, set[int]]:
    """`matched_ids` in one searcher: the terms each of `ids` matches there, one search
    per `MASK_TERMS` terms (`unit_ids`: the unit id of each of a list of addresses)."""
    out: dict[int, set[int]] = {}
    only = [(tantivy.Occur.Must, ids_query(ix.schema, ids))]
    for lo in range(0, len(terms), MASK_TERMS):
        group = []
        for i, t in enumerate(terms[lo:lo + MASK_TERMS]):
            q = match_query(ix.schema, ix.analyzer, s, t)
            if q is not None:
                group.append((tantivy.Occur.Should,
                              tantivy.Query.const_score_query(q, float(1 << i))))
        if not group:
            continue
        res = s.search(restricted(tantivy.Query.boolean_query(group), only), len(ids),
                       count=False)
        for u, (score, _) in zip(unit_ids([a for _, a in res.hits]), res.hits, strict=True):
            bits = round(score)
            out.setdefault(u, set()).update(lo + i for i in range(MASK_TERMS) if bits >> i & 1)
    return out


def merge(found: list[dict[str, Any]], live: list[dict[str, Any]], replaced: set[int],
          limit: int) -> tuple[list[dict[str, Any]], int]:
    """The index's candidates without the units the tail replaced, and the tail's, best
    first (an equal score: the index's first, as a later segment's documents come after
    it), at most `limit`; and how many of the index's were left out."""
    kept = [c for c in found if c["unit_id"] not in replaced]
    both = sorted(kept + live, key=lambda c: -c["bm25"])
    return both[:limit], len(found) - len(kept)


def session_pks(conn: sqlite3.Connection, f: Filters) -> list[int]:
    """The sessions the filters allow. A project and what lies below it is a range of
    the `sessions_project` index in SQLite: `LIKE 'root/%'` scanned the whole index (1.1
    ms per context for 2,000 sessions), the range reads the project's rows (0.1 ms). It
    matches case-sensitively, as `retrieval._within` and PostgreSQL's LIKE (which keeps
    it: a collation may not order '/' next to '0')."""
    within = f.project_within
    if within is None or not isinstance(conn, sqlite3.Connection):
        clauses, args = fallback.session_where(f)
    else:
        clauses, args = fallback.session_where(replace(f, project_within=None))
        root = within.rstrip("/")
        clauses.append("(s.project = ? OR (s.project >= ? AND s.project < ?))")
        args += [root, root + "/", root + "0"]  # "0" follows "/"
    return [r[0] for r in conn.execute(
        "SELECT s.id FROM sessions s WHERE " + " AND ".join(clauses), args)]
